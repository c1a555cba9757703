"""The console's Links page (app/console/links.py) over HTTP (Flask test client, real database): the
owner creates links (form errors by field) and deactivates one after a confirmation; a viewer sees
and changes nothing; each link shows its address with a copy button, a QR code of that address
(decoded with zbar), its state and payments ("more than its maximum" when a link counts more), and
a link to the processes list filtered by it; the display name on the Links and payouts pages."""
import html
import io
import re
from urllib.parse import unquote

import pytest
from support import dbutil
from support.console import csrf_of, log_in


@pytest.fixture
def console(runner, client, merchant):
    return log_in(runner, client, merchant)


FORM = {"description": "Pottery class, Saturday", "amount": "25", "currency": "EUR",
        "max_payments": "", "expires_at": "", "success_url": ""}


def create(console, **fields):
    page = console.get("/dashboard/links")
    return console.post("/dashboard/links",
                        data={**FORM, **fields, "csrf_token": csrf_of(page.text)})


def link_ids(text):
    return re.findall(r'<article class="panel link" id="link-(link_[0-9a-f]{24})"', text)


def count(app, sql, *params):
    return dbutil.scalar(app.config["DATABASE"], sql, *params)


def test_the_owner_creates_a_link_and_sees_its_address_qr_and_state(console, app, merchant):
    response = create(console, amount="19.90", max_payments="3", expires_at="2026-12-24T18:00",
                      success_url="http://shop.test/thanks")
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/dashboard/links?done=created#link-link_")
    page = console.get(location)
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and "Payment link created" in text
    [link_id] = link_ids(text)
    [row] = dbutil.query(app.config["DATABASE"], "SELECT amount, currency, description,"
                         " max_payments, expires_at, success_url, merchant_id FROM links"
                         " WHERE id = ?", link_id)
    assert tuple(row) == ("19.90", "EUR", "Pottery class, Saturday", 3, 1_798_135_200,
                          "http://shop.test/thanks", merchant["merchantId"])
    url = f"http://localhost/l/{link_id}"
    assert f'<code class="mono" id="link-url-{link_id}">{url}</code>' in text
    assert f'data-copy="#link-url-{link_id}"' in text
    assert f'<span class="badge badge-completed" id="link-state-{link_id}">active</span>' in text
    assert f'<dd id="link-payments-{link_id}">0 of 3</dd>' in text
    assert "€19.90" in text and "2026-12-24 18:00:00 UTC" in text
    assert f'href="/dashboard/?link={link_id}">Its processes</a>' in text
    assert f'href="/dashboard/links/{link_id}/deactivate">Deactivate</a>' in text
    # The QR code is drawn by the server, and reads back as the link's address.
    [uri] = re.findall(r'<img class="qr" src="(data:image/svg\+xml;charset=utf-8,[^"]+)"', text)
    assert qr_text(uri) == url
    csp = page.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    # The navigation has the page.
    assert '<a href="/dashboard/links">Links</a>' in text


def qr_text(data_uri):
    """The text zbar reads from the page's QR code (an SVG data: URL, rasterised here)."""
    from PIL import Image, ImageDraw
    from support.qr_decode import qr_texts

    svg = unquote(data_uri.split(",", 1)[1])
    size = int(re.search(r'viewBox="0 0 (\d+) \1"', svg)[1])
    scale = 8
    image = Image.new("L", (size * scale, size * scale), 255)
    draw = ImageDraw.Draw(image)
    path = re.search(r'stroke="#000" d="([^"]+)"', svg)[1]
    # segno's SVG path: "M<x> <y>h<len>" runs (relative moves m<dx> <dy>), one module high.
    x = y = 0.0
    for command, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?: (-?[\d.]+))?", path):
        if command == "M":
            x, y = float(a), float(b)
        elif command == "m":
            x, y = x + float(a), y + float(b)
        else:
            length = float(a)
            draw.rectangle([x * scale, (y - 0.5) * scale, (x + length) * scale - 1,
                            (y + 0.5) * scale - 1], fill=0)
            x += length
    out = io.BytesIO()
    image.save(out, format="PNG")
    texts = qr_texts(out.getvalue())
    assert len(texts) == 1, texts
    return texts[0]


@pytest.mark.parametrize("fields, field, message", [
    ({"amount": "abc"}, "amount", "Enter the amount as a number, e.g. 19.99."),
    ({"amount": "0"}, "amount", "Must be greater than 0."),
    ({"amount": "1.005"}, "amount", "Must have at most 2 decimal places (EUR)."),
    ({"description": ""}, "description", "Length must be between 1 and 250."),
    ({"currency": "XXX"}, "currency", "Must be an ISO 4217 currency code in use"),
    ({"max_payments": "0"}, "max_payments",
     "Must be a whole number from 1 to 1,000,000,000, or null."),
    ({"max_payments": "٣"}, "max_payments",
     "Must be a whole number from 1 to 1,000,000,000, or null."),
    ({"expires_at": "tomorrow"}, "expires_at", "Enter a UTC time as YYYY-MM-DDTHH:MM."),
    ({"expires_at": "2026-11-18T11:00"}, "expires_at", "Must be in the future."),
    ({"success_url": "ftp://shop.test"}, "success_url", "Must be an absolute https:// URL"),
])
def test_a_refused_link_says_why_by_its_field_and_keeps_the_form(console, app, fields, field,
                                                                 message):
    response = create(console, **fields)
    text = response.get_data(as_text=True)
    assert response.status_code == 400
    found = re.search(rf'<p class="field-error" id="{field}-error">([^<]*)</p>', text)
    assert found and html.unescape(found[1]).startswith(message), (
        text[text.find("New payment"):][:2000])
    assert 'aria-invalid="true"' in text
    assert count(app, "SELECT count(*) FROM links") == 0
    if "description" not in fields:
        assert 'value="Pottery class, Saturday"' in text


def test_a_live_merchant_needs_an_https_success_url(runner, client, make_merchant):
    live = make_merchant(name="Live shop", live=True)
    console = log_in(runner, client, live)
    response = create(console, success_url="http://shop.test/thanks")
    assert response.status_code == 400
    assert ("Must be an https:// URL: live payments never send a customer to plain http."
            in response.get_data(as_text=True))


def test_deactivating_asks_first_then_the_link_is_gone(console, app, client):
    create(console)
    link_id = link_ids(console.get("/dashboard/links").get_data(as_text=True))[0]
    confirm = console.get(f"/dashboard/links/{link_id}/deactivate")
    text = confirm.get_data(as_text=True)
    assert confirm.status_code == 200 and "Deactivate this payment link?" in text
    assert f'<form method="post" action="/dashboard/links/{link_id}/deactivate"' in text
    assert '<button type="submit" class="danger">Deactivate</button>' in text
    # asking changes nothing
    assert count(app, "SELECT count(*) FROM links WHERE deactivated_at IS NOT NULL") == 0
    # Without the form's token: refused.
    assert console.post(f"/dashboard/links/{link_id}/deactivate").status_code == 400
    done = console.post(f"/dashboard/links/{link_id}/deactivate",
                        data={"csrf_token": csrf_of(text)})
    assert done.status_code == 303 and "done=deactivated" in done.headers["Location"]
    page = console.get(done.headers["Location"]).get_data(as_text=True)
    assert "The link is deactivated" in page
    assert f'id="link-state-{link_id}">deactivated</span>' in page
    assert f"/dashboard/links/{link_id}/deactivate" not in page
    assert client.get(f"/l/{link_id}").status_code == 410
    # Asking again goes back to the page.
    assert console.get(f"/dashboard/links/{link_id}/deactivate").status_code == 303


def test_another_merchants_link_is_not_found(console, make_merchant, client):
    other = make_merchant(name="Other")
    made = client.post("/payment-button/links", json={"amount": 5, "description": "Theirs"},
                       headers={"x-secret-key": other["secretKey"]}).get_json()
    assert console.get(f"/dashboard/links/{made['linkId']}/deactivate").status_code == 404
    page = console.get("/dashboard/links")
    assert console.post(f"/dashboard/links/{made['linkId']}/deactivate",
                        data={"csrf_token": csrf_of(page.text)}).status_code == 404
    assert "Theirs" not in page.get_data(as_text=True)


def test_a_viewer_sees_the_links_and_changes_nothing(runner, client, merchant, app):
    client.post("/payment-button/links", json={"amount": 5, "description": "Coffee"},
                headers={"x-secret-key": merchant["secretKey"]})
    viewer = log_in(runner, client, merchant, role="viewer")
    page = viewer.get("/dashboard/links")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and "Coffee" in text
    [link_id] = link_ids(text)
    assert "New payment link" not in text and "Deactivate" not in text
    assert "Save display name" not in text and 'id="display-name-shown">Test shop</strong>' in text
    assert '<img class="qr"' in text
    token = csrf_of(text)
    assert viewer.post("/dashboard/links", data={**FORM, "csrf_token": token}).status_code == 403
    assert viewer.get(f"/dashboard/links/{link_id}/deactivate").status_code == 403
    assert viewer.post(f"/dashboard/links/{link_id}/deactivate",
                       data={"csrf_token": token}).status_code == 403
    assert viewer.post("/dashboard/settings/display-name",
                       data={"csrf_token": token, "display_name": "X"}).status_code == 403
    assert count(app, "SELECT count(*) FROM links") == 1
    assert count(app, "SELECT count(*) FROM links WHERE deactivated_at IS NOT NULL") == 0


def test_payments_count_and_more_than_the_maximum_show(console, client, merchant, app):
    create(console, max_payments="1")
    link_id = link_ids(console.get("/dashboard/links").get_data(as_text=True))[0]
    started = [client.post(f"/l/{link_id}").headers["Location"].rsplit("/", 1)[1] for _ in range(2)]
    for process_id in started:
        paid = client.post(f"/payment-button/process/{process_id}/sandbox/pay",
                           json={"outcome": "success"},
                           headers={"x-public-key": merchant["publicKey"]})
        assert paid.status_code == 200
    text = console.get("/dashboard/links").get_data(as_text=True)
    assert (f'<dd id="link-payments-{link_id}">2 of 1 <span class="badge mark">'
            f'more than its maximum of 1</span></dd>') in text
    assert f'id="link-state-{link_id}">sold out</span>' in text


def test_the_processes_list_filters_by_link(console, client, merchant, api):
    create(console)
    create(console, description="Other thing")
    first, second = reversed(link_ids(console.get("/dashboard/links").get_data(as_text=True)))
    made = {first: [], second: []}
    for link_id, times in ((first, 2), (second, 1)):
        for _ in range(times):
            made[link_id].append(client.post(f"/l/{link_id}").headers["Location"].rsplit("/", 1)[1])
    plain = api.preorder().get_json()["processId"]
    listed = console.get(f"/dashboard/?link={first}").get_data(as_text=True)
    shown = set(re.findall(r'href="/dashboard/processes/([0-9a-f-]{36})"', listed))
    assert shown == set(made[first])
    assert f'<input type="hidden" name="link" value="{first}">' in listed
    assert f"Made from the payment link <code class=\"mono\">{first}</code>" in listed
    # The CSV of that filter has the same processes.
    csv_text = console.get(f"/dashboard/processes.csv?link={first}").get_data(as_text=True)
    assert (all(p in csv_text for p in made[first]) and made[second][0] not in csv_text
            and plain not in csv_text)
    # A search for one process id keeps the filter.
    searched = console.get(f"/dashboard/?link={first}&q={made[second][0]}").get_data(as_text=True)
    assert not re.findall(r'href="/dashboard/processes/([0-9a-f-]{36})"', searched)
    unfiltered = console.get("/dashboard/").get_data(as_text=True)
    assert all(p in unfiltered for p in made[first] + made[second] + [plain])


def test_the_display_name_is_set_on_the_settings_page_and_shown_on_the_links_page(console, client,
                                                                                  app, api):
    page = console.get("/dashboard/settings").get_data(as_text=True)
    assert '<label for="display-name-input">Display name' in page
    saved = console.post("/dashboard/settings/display-name",
                         data={"csrf_token": csrf_of(page), "display_name": " Clay & Co "})
    assert saved.status_code == 303
    assert saved.headers["Location"] == "/dashboard/settings?done=display-name#display-name"
    shown = console.get(saved.headers["Location"]).get_data(as_text=True)
    assert "Display name saved" in shown
    assert 'id="display-name-shown">Clay &amp; Co</strong>' in shown
    links_page = console.get("/dashboard/links").get_data(as_text=True)
    assert ('id="display-name-shown">Clay &amp; Co</strong>: change it on the'
            ' <a href="/dashboard/settings#display-name">') in links_page
    assert '<label for="display-name-input">' not in links_page
    process_id = api.preorder().get_json()["processId"]
    assert "Clay &amp; Co" in client.get(f"/checkout/{process_id}").get_data(as_text=True)
    token = csrf_of(page)
    refused = console.post("/dashboard/settings/display-name",
                           data={"csrf_token": token, "display_name": "x" * 81})
    assert refused.status_code == 400 and "at most 80 characters" in refused.get_data(as_text=True)
    cleared = console.post("/dashboard/settings/display-name",
                           data={"csrf_token": token, "display_name": ""})
    assert cleared.status_code == 303
    assert "Test shop" in client.get(f"/checkout/{process_id}").get_data(as_text=True)


def test_links_are_paged_newest_first(console, app, monkeypatch, clock):
    from app.console import links as page_module

    monkeypatch.setattr(page_module, "PAGE_SIZE", 2)
    for n in range(3):
        create(console, description=f"Thing {n}")
        clock.advance(1)
    first = console.get("/dashboard/links").get_data(as_text=True)
    assert len(link_ids(first)) == 2 and first.index("Thing 2") < first.index("Thing 1")
    older = re.search(r'<a href="(/dashboard/links\?after=link_[0-9a-f]{24})">Older links</a>',
                      first)[1]
    second = console.get(older).get_data(as_text=True)
    assert "Thing 0" in second and "Thing 1" not in second and "First page" in second
    assert console.get("/dashboard/links?after=link_" + "0" * 24).status_code == 400
    assert console.get("/dashboard/links?after=%C2%B3").status_code == 400


def test_the_links_page_needs_a_login(client):
    assert client.get("/dashboard/links").headers["Location"] == "/dashboard/login"
    assert client.post("/dashboard/links", data=FORM).status_code == 401
