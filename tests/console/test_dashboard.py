"""The merchant console over HTTP (Flask test client, real database): users CLI, login, throttling
and lock-out (injected clock), sessions, CSRF, roles, security headers, the processes list, search,
CSV export, one process's page and actions, webhooks. Chromium tests:
tests/console/test_dashboard_browser.py."""
import csv
import html
import io
import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook
from support import dbutil
from support.helpers import Api
from support.receiver import Reply

from app.data import outbox as event_rows

PASSWORD = "correct horse battery"
CSP = re.compile(r"script-src 'self';")


@pytest.fixture
def make_user(runner):
    def make(email, merchant_id, role="owner", password=PASSWORD):
        result = runner.invoke(args=["users", "create", email, "--merchant", merchant_id,
                                     "--role", role],
                               input=password + "\n")
        assert result.exit_code == 0, result.output
        return email

    return make


@pytest.fixture
def owner(make_user, merchant):
    return make_user("owner@shop.example", merchant["merchantId"])


def csrf_of(html):
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def log_in(client, email, password=PASSWORD):
    page = client.get("/dashboard/login")
    return client.post("/dashboard/login", data={"email": email, "password": password,
                                                 "csrf_token": csrf_of(page.text)})


@pytest.fixture
def console(client, owner):
    response = log_in(client, owner)
    assert response.status_code == 303 and response.headers["Location"] == "/dashboard/overview"
    return client


def form_token(client, path="/dashboard/"):
    return csrf_of(client.get(path).text)


# --- Users CLI ------------------------------------------------------------------------------------

def test_users_cli_creates_lists_disables_and_sets_passwords(runner, merchant, make_user, client):
    make_user("Ann@Shop.example", merchant["merchantId"], role="viewer")
    listed = runner.invoke(args=["users", "list"])
    assert listed.exit_code == 0
    assert re.search(r"ann@shop\.example\s+mer_\w+\s+viewer\s+active", listed.output)
    again = runner.invoke(args=["users", "create", "ann@shop.example", "--merchant",
                                merchant["merchantId"]],
                          input=PASSWORD + "\n")
    assert again.exit_code == 1 and "exists already" in again.output
    short = runner.invoke(args=["users", "create", "bob@shop.example", "--merchant",
                                merchant["merchantId"]],
                          input="short\n")
    assert short.exit_code == 1 and "at least 10 characters" in short.output
    unknown = runner.invoke(args=["users", "create", "bob@shop.example", "--merchant", "mer_nope"],
                            input=PASSWORD + "\n")
    assert unknown.exit_code == 1 and "No merchant mer_nope" in unknown.output

    assert log_in(client, "ann@shop.example").status_code == 303
    assert client.get("/dashboard/").status_code == 200
    changed = runner.invoke(args=["users", "set-password", "ann@shop.example"],
                            input="another long one\n")
    assert changed.output == "Password of ann@shop.example set (1 session(s) ended).\n"
    assert client.get("/dashboard/").headers["Location"] == "/dashboard/login"  # the session ended
    assert log_in(client, "ann@shop.example").status_code == 401
    assert log_in(client, "ann@shop.example", "another long one").status_code == 303
    disabled = runner.invoke(args=["users", "disable", "ann@shop.example"])
    assert disabled.output == "Disabled ann@shop.example (1 session(s) ended).\n"
    assert client.get("/dashboard/").status_code == 302
    assert log_in(client, "ann@shop.example", "another long one").status_code == 401
    hashed = dbutil.scalar(runner.app.config["DATABASE"], "SELECT password_hash FROM users")
    assert hashed.startswith("scrypt:") and "another" not in hashed


# --- Login, sessions, lock-out --------------------------------------------------------------------

def test_logged_out_visitor_is_sent_to_login_and_the_cookie_is_safe(client, owner):
    assert client.get("/dashboard/").headers["Location"] == "/dashboard/login"
    page = client.get("/dashboard/login")
    assert page.status_code == 200
    assert 'for="email">Email</label>' in page.text
    assert 'for="password">Password</label>' in page.text
    response = log_in(client, owner)
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("console_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/dashboard" in cookie and "Secure" not in cookie  # plain HTTP in the test
    assert client.get("/dashboard/").status_code == 200
    https = "https://console.example"  # behind nginx: X-Forwarded-Proto https from loopback
    page = client.get("/dashboard/login", base_url=https)
    assert page.headers["Set-Cookie"].startswith("__Host-console_login_csrf=")
    assert "; Secure; HttpOnly; Path=/; SameSite=Strict" in page.headers["Set-Cookie"]
    response = client.post("/dashboard/login", base_url=https, data={
        "email": owner, "password": PASSWORD, "csrf_token": csrf_of(page.text)})
    cookies = response.headers.getlist("Set-Cookie")
    assert response.status_code == 303 and len(cookies) == 2
    assert re.fullmatch(r"__Host-console_session=[\w-]{43}; Expires=[^;]+; Max-Age=43200; Secure;"
                        r" HttpOnly; Path=/; SameSite=Lax", cookies[0]), cookies[0]
    assert cookies[1].startswith("__Host-console_login_csrf=; Expires=Thu, 01 Jan 1970")
    token = cookies[0].split(";")[0].split("=", 1)[1]
    assert client.get("/dashboard/", base_url=https).status_code == 200
    # Behind HTTPS only the prefixed cookie opens a session: the bare name, which a sibling
    # subdomain could plant for the whole domain, is not read.
    other = client.application.test_client()
    other.set_cookie("console_session", token, domain="console.example")
    assert other.get("/dashboard/", base_url=https).headers["Location"] == "/dashboard/login"
    other.set_cookie("__Host-console_session", token, domain="console.example")
    assert other.get("/dashboard/", base_url=https).status_code == 200


def test_wrong_password_and_unknown_email_say_the_same(client, owner):
    wrong = log_in(client, owner, "not the password")
    unknown = log_in(client, "nobody@shop.example", PASSWORD)
    assert wrong.status_code == unknown.status_code == 401
    assert "Wrong email or password." in wrong.text and "Wrong email or password." in unknown.text


def test_ten_failures_lock_the_email_even_for_the_right_password(client, owner, clock):
    for n in range(10):
        response = log_in(client, owner, "wrong password!")
        assert response.status_code == 401, n
        clock.advance(20)  # past each slow-down wait (at most 16 s)
    locked = log_in(client, owner)
    assert locked.status_code == 429
    assert "this account is locked" in locked.text and int(locked.headers["Retry-After"]) >= 5 * 60
    clock.advance(5 * 60)
    assert log_in(client, owner).status_code == 429  # still locked after 5 minutes
    clock.advance(10 * 60 + 1)
    assert log_in(client, owner).status_code == 303


def test_fifty_failures_from_one_client_lock_that_client_only(client, make_user, merchant, clock):
    """Behind the local nginx, the client is X-Forwarded-For's address: one client trying many
    emails is locked, another client is not."""
    make_user("other@shop.example", merchant["merchantId"])
    attacker = {"X-Forwarded-For": "203.0.113.9"}
    token = csrf_of(client.get("/dashboard/login").text)
    for n in range(50):
        response = client.post("/dashboard/login", headers=attacker, data={
            "email": f"guess{n}@shop.example", "password": "wrong password!", "csrf_token": token})
        assert response.status_code == 401, n
        token = csrf_of(response.text)  # each login page sets a new token
    refused = client.post("/dashboard/login", headers=attacker, data={
        "email": "other@shop.example", "password": PASSWORD, "csrf_token": token})
    assert refused.status_code == 429 and "locked" in refused.text
    token = csrf_of(refused.text)
    elsewhere = client.post("/dashboard/login", headers={"X-Forwarded-For": "198.51.100.7"}, data={
        "email": "other@shop.example", "password": PASSWORD, "csrf_token": token})
    assert elsewhere.status_code == 303


def test_failures_slow_down_before_the_lock(client, owner, clock):
    for _ in range(5):
        assert log_in(client, owner, "wrong password!").status_code == 401
    too_soon = log_in(client, owner)
    assert too_soon.status_code == 429 and too_soon.headers["Retry-After"] == "1"
    assert "wait 1 second(s)" in too_soon.text
    clock.advance(1)
    assert log_in(client, owner).status_code == 303


def test_session_ends_at_logout_and_after_its_hours(console, clock):
    token = form_token(console)
    assert console.post("/dashboard/logout", data={"csrf_token": token}).status_code == 303
    assert console.get("/dashboard/").status_code == 302
    log_in(console, "owner@shop.example")
    clock.advance(12 * 3600 - 1)
    assert console.get("/dashboard/").status_code == 200
    clock.advance(1)
    assert console.get("/dashboard/").headers["Location"] == "/dashboard/login"


def test_login_without_its_csrf_token_is_refused(client, owner):
    client.get("/dashboard/login")
    response = client.post("/dashboard/login", data={"email": owner, "password": PASSWORD})
    assert response.status_code == 400 and "security token" in response.text
    assert "console_session" not in response.headers.get("Set-Cookie", "")


def test_a_post_without_the_csrf_token_is_refused(console, api):
    pid = api.preorder().get_json()["processId"]
    for data in ({}, {"csrf_token": "forged"}):
        response = console.post(f"/dashboard/processes/{pid}/cancel", data=data)
        assert response.status_code == 400 and "security token" in response.text
    assert api.get(pid).get_json()["status"] == "pending"


def test_security_headers_on_every_console_page(console, api):
    pid = api.preorder().get_json()["processId"]
    for path in ("/dashboard/", "/dashboard/overview", "/dashboard/login",
                 f"/dashboard/processes/{pid}", "/dashboard/webhooks", "/dashboard/nope",
                 "/dashboard/processes.csv"):
        response = console.get(path)
        csp = response.headers["Content-Security-Policy"]
        assert CSP.search(csp) and "'unsafe-inline'" not in csp, path
        assert "frame-ancestors 'none'" in csp, path
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "no-store"
    css = console.get("/dashboard/static/console.css")
    assert css.status_code == 200 and css.mimetype == "text/css"
    assert "<script>" not in console.get("/dashboard/").text  # scripts only from files


# --- Roles and merchants --------------------------------------------------------------------------

def test_a_viewer_sees_no_buttons_and_a_forged_post_is_refused(client, make_user, merchant, api):
    pid = api.preorder().get_json()["processId"]
    make_user("viewer@shop.example", merchant["merchantId"], role="viewer")
    log_in(client, "viewer@shop.example")
    page = client.get(f"/dashboard/processes/{pid}")
    assert page.status_code == 200 and ">Cancel</" not in page.text
    token = csrf_of(page.text)  # its logout form's token: a valid token of this session
    response = client.post(f"/dashboard/processes/{pid}/cancel", data={"csrf_token": token})
    assert response.status_code == 403 and "viewer" in response.text
    assert api.get(pid).get_json()["status"] == "pending"
    webhooks = client.get("/dashboard/webhooks")
    assert "Send test event" not in webhooks.text and "Save URL" not in webhooks.text
    assert client.get(f"/dashboard/processes/{pid}/refund").status_code == 403
    for path in ("/webhooks/test", "/webhooks/replay-failed", "/webhooks/url",
                 f"/processes/{pid}/refund", "/keys/roll", "/keys/roll-webhook-secret",
                 f"/processes/{pid}/events/evt_x/resend", f"/processes/{pid}/refunds/re_x/cancel",
                 f"/processes/{pid}/refunds/re_x/transaction"):
        assert client.post("/dashboard" + path, data={"csrf_token": token}).status_code == 403, path
    for path in (f"/processes/{pid}/cancel", "/keys/roll", "/keys/roll-webhook-secret",
                 "/keys/1/revoke"):
        # no confirmation page either
        assert client.get("/dashboard" + path).status_code == 403, path


def test_another_merchants_process_is_the_console_404_page(console, make_shop):
    other = make_shop()
    pid = other.api.preorder().get_json()["processId"]
    for path in (f"/dashboard/processes/{pid}", "/dashboard/processes/not-an-id"):
        response = console.get(path)
        assert response.status_code == 404 and response.mimetype == "text/html"
        assert "<h1>Not found</h1>" in response.text
    cancel = console.post(f"/dashboard/processes/{pid}/cancel",
                          data={"csrf_token": form_token(console)})
    assert cancel.status_code == 404
    assert other.api.get(pid).get_json()["status"] == "pending"
    assert listed(console.get(f"/dashboard/?q={pid}").text) == []


# --- Processes list, search, CSV ------------------------------------------------------------------

def make_processes(api, clock, n, metadata=lambda i: {"orderRef": f"A-{i}"}):
    ids = []
    for i in range(n):
        ids.append(api.preorder({"amount": 10 + i,
                                 "metadata": metadata(i)}).get_json()["processId"])
        clock.advance(60)
    return ids


def listed(html):
    return re.findall(r'href="/dashboard/processes/([0-9a-f-]{36})"', html)


def test_list_is_newest_first_in_pages_of_50(console, api, clock):
    ids = make_processes(api, clock, 55)
    first = console.get("/dashboard/")
    assert listed(first.text) == ids[::-1][:50]
    next_url = re.search(r'href="([^"]+)" rel="next"', first.text).group(1).replace("&amp;", "&")
    second = console.get(next_url)
    assert listed(second.text) == ids[::-1][50:]
    assert 'rel="next"' not in second.text


def test_filter_by_status_mode_and_date(console, api, clock):
    ids = make_processes(api, clock, 3)
    api.cancel(ids[1])
    assert listed(console.get("/dashboard/?status=cancelled").text) == [ids[1]]
    assert listed(console.get("/dashboard/?status=pending").text) == [ids[2], ids[0]]
    clock.advance(1800)
    assert listed(console.get("/dashboard/?status=expired").text) == [ids[2], ids[0]]
    assert listed(console.get("/dashboard/?mode=test").text) == ids[::-1]
    assert listed(console.get("/dashboard/?mode=live").text) == []
    assert listed(console.get("/dashboard/?from=2026-11-18&to=2026-11-18").text) == ids[::-1]
    assert listed(console.get("/dashboard/?to=2026-11-17").text) == []
    bad = console.get("/dashboard/?from=yesterday")
    assert bad.status_code == 400 and "From: enter a date as YYYY-MM-DD." in bad.text


def test_search_by_metadata_value_or_process_id(console, api, clock):
    ids = make_processes(api, clock, 4, lambda i: {"orderRef": f"A-{i}",
                                                     "email": f"Buyer{i % 2}@Example.com",
                                                     "items": [{"sku": "deep"}]})
    assert listed(console.get("/dashboard/?q=A-2").text) == [ids[2]]
    assert listed(console.get("/dashboard/?q=%20buyer1@example.COM%20").text) == [ids[3], ids[1]]
    assert listed(console.get("/dashboard/?q=deep").text) == []  # top-level values only
    assert listed(console.get(f"/dashboard/?q={ids[0].upper()}").text) == [ids[0]]
    customer_ref = "0f8fad5b-d9cb-469f-a165-70867728950e"  # a merchant's own UUID in its metadata
    tagged = api.preorder({"amount": 1,
                           "metadata": {"cartId": customer_ref}}).get_json()["processId"]
    assert listed(console.get(f"/dashboard/?q={customer_ref}").text) == [tagged]
    assert listed(console.get("/dashboard/?q=A-2&status=cancelled").text) == []
    api.cancel(ids[2])
    assert listed(console.get("/dashboard/?q=A-2&status=cancelled").text) == [ids[2]]
    page = console.get("/dashboard/?q=A-2")
    assert 'type="search"' in page.text and 'value="A-2"' in page.text


def test_search_and_export_of_metadata_holding_nul(console, api):
    # PostgreSQL's text cannot hold NUL: `?q=%00` was a 500 page there, and so was the CSV.
    nul = api.preorder_raw(b'{"amount": 5, "metadata": {"ref": "A\\u0000B", "k\\u0000": "v"}}')
    plain = api.preorder({"amount": 5, "metadata": {"ref": "AB"}})
    nul_id, plain_id = nul.get_json()["processId"], plain.get_json()["processId"]
    assert listed(console.get("/dashboard/?q=a%00b").text) == [nul_id]
    page = console.get("/dashboard/?q=%00")
    assert page.status_code == 200 and listed(page.text) == []
    assert listed(console.get("/dashboard/").text) == [plain_id, nul_id]
    rows = read_csv(console.get("/dashboard/processes.csv?q=a%00b"))
    assert [(r["processId"], r["metadata"]) for r in rows] == [
        (nul_id, '{"ref":"A\\u0000B","k\\u0000":"v"}')]
    assert read_csv(console.get("/dashboard/processes.csv?q=%00")) == []
    assert console.get(f"/dashboard/processes/{nul_id}").status_code == 200


def read_csv(response):
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"] == 'attachment; filename="processes.csv"'
    return list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))


def test_csv_equals_what_the_merchant_api_lists(console, api, clock, monkeypatch):
    from app.console import processes as list_pages

    monkeypatch.setattr(list_pages, "CSV_BATCH", 7)  # several batches
    ids = make_processes(api, clock, 20, lambda i: {"orderRef": f"A-{i}", "note": 'say "hi", ok'})
    api.cancel(ids[3])
    clock.advance(1800)
    listed_by_api = api.list("?limit=100").get_json()["data"]
    rows = read_csv(console.get("/dashboard/processes.csv"))
    assert [r["processId"] for r in rows] == [p["processId"] for p in listed_by_api]
    for row, p in zip(rows, listed_by_api, strict=True):
        assert row == {"processId": p["processId"], "status": p["status"],
                       "amount": f'{p["amount"]:.2f}', "livemode": "false",
                       "createdAt": p["createdAt"], "updatedAt": p["updatedAt"],
                       "expiresAt": p["expiresAt"],
                       "metadata": json.dumps(p["metadata"], separators=(",", ":")),
                       "assetId": "", "networkId": "", "amountDue": "", "amountPaid": "",
                       "amountRefunded": "", "marks": "",
                       "transferTxHashes": "", "transferLogIndexes": "", "transferBlockNumbers": "",
                       "transferBlockHashes": "", "currency": p["currency"], "rate": "",
                       "rateSource": "", "rateRound": ""}
    cancelled = read_csv(console.get("/dashboard/processes.csv?status=cancelled"))
    assert [r["processId"] for r in cancelled] == [ids[3]]
    assert ('href="/dashboard/processes.csv?status=cancelled"'
            in console.get("/dashboard/?status=cancelled").text)


def test_metadata_keys_chosen_on_the_export_form_become_columns(console, api, clock):
    metadata = ['{"orderRef":"A-1","email":"a@example.com","qty":2,"gift":true,'
                '"lines":[{"sku":"X"}]}',
                '{"orderRef":"=HYPERLINK(\\"http://x\\")","note":"no email","qty":-1.50}']
    created = [api.preorder_raw(f'{{"amount":{amount},"metadata":{m}}}')
               for amount, m in (("25.5", metadata[0]), ("7", metadata[1]))]
    assert [c.status_code for c in created] == [200, 200], created[0].get_json()
    ids = [c.get_json()["processId"] for c in created]
    page = console.get("/dashboard/?status=pending")
    assert '<label for="columns">Metadata keys as columns' in page.text
    form = re.search(r'<form class="export inline" method="get"'
                     r' action="/dashboard/processes.csv">(.*?)</form>', page.text, re.S)[1]
    assert '<input type="hidden" name="status" value="pending">' in form  # the filter goes with it
    exported = console.get("/dashboard/processes.csv?status=pending"
                           "&columns=orderRef,+email ,qty,gift,lines,orderRef,")
    header = exported.text.split("\r\n", 1)[0].split(",")
    assert header[-5:] == ["metadata.orderRef", "metadata.email", "metadata.qty", "metadata.gift",
                           "metadata.lines"]
    rows = {r["processId"]: r for r in read_csv(exported)}
    keys = ("orderRef", "email", "qty", "gift", "lines")
    assert [rows[ids[0]][f"metadata.{k}"] for k in keys] == [
        "A-1", "a@example.com", "2", "true", '[{"sku":"X"}]']
    assert [rows[ids[1]][f"metadata.{k}"] for k in keys] == [
        "'=HYPERLINK(\"http://x\")", "", "-1.50", "", ""]  # a formula is never one; a number stays
    assert rows[ids[0]]["metadata"] == metadata[0]  # the JSON cell stays
    assert (rows[ids[0]]["amount"], rows[ids[1]]["amount"]) == ("25.50", "7.00")
    default = console.get("/dashboard/processes.csv").text.split("\r\n", 1)[0]
    # no metadata column unless asked
    assert default.endswith(",currency,rate,rateSource,rateRound")
    many = ",".join(f"k{i}" for i in range(21))
    refused = console.get(f"/dashboard/processes.csv?columns={many}")
    assert refused.status_code == 400 and "columns: name at most 20 metadata keys." in refused.text


# --- One process ----------------------------------------------------------------------------------

@pytest.fixture
def shop_console(client, shop, make_user):
    """A client logged in as the owner of `shop` (whose webhooks reach `receiver`)."""
    make_user("staff@shop.example", shop.keys["merchantId"])
    assert log_in(client, "staff@shop.example").status_code == 303
    return client


def test_process_page_cancel_and_resend(shop_console, shop, worker, app):
    console = shop_console
    pid = shop.api.preorder({"amount": 19.99,
                             "metadata": {"orderRef": "A-77"}}).get_json()["processId"]
    page = console.get(f"/dashboard/processes/{pid}")
    # in the process's currency
    assert page.status_code == 200 and '<dd id="amount">$19.99</dd>' in page.text
    cancel_link = f'<a class="button danger" href="/dashboard/processes/{pid}/cancel">Cancel</a>'
    assert "&#34;orderRef&#34;: &#34;A-77&#34;" in page.text and cancel_link in page.text
    confirm = console.get(f"/dashboard/processes/{pid}/cancel")  # a confirmation first
    assert confirm.status_code == 200 and f"Cancel process {pid}?" in confirm.text
    assert shop.api.get(pid).get_json()["status"] == "pending"
    cancelled = console.post(f"/dashboard/processes/{pid}/cancel",
                             data={"csrf_token": csrf_of(confirm.text)})
    # redirected: a reload sends nothing again
    assert (cancelled.status_code, cancelled.headers["Location"]) == (
        303, f"/dashboard/processes/{pid}?done=cancelled")
    cancelled = console.get(cancelled.headers["Location"])
    assert "The process is cancelled" in cancelled.text
    assert shop.api.get(pid).get_json()["status"] == "cancelled"
    assert cancel_link not in cancelled.text
    # nothing to confirm
    assert console.get(f"/dashboard/processes/{pid}/cancel").status_code == 303
    again = console.post(f"/dashboard/processes/{pid}/cancel",
                         data={"csrf_token": csrf_of(page.text)})
    assert again.status_code == 409
    assert "is cancelled; only a pending process can be cancelled" in again.text

    worker.run_once()
    conn = app.extensions["db"].connection()
    (event,) = event_rows.for_process(conn, pid)
    assert len(event_rows.attempts_of(conn, event.id)) == 1
    refresh = f'<meta http-equiv="refresh" content="2; url=/dashboard/processes/{pid}">'
    assert refresh not in console.get(f"/dashboard/processes/{pid}").text
    resent = console.post(f"/dashboard/processes/{pid}/events/{event.id}/resend",
                          data={"csrf_token": csrf_of(page.text)}, follow_redirects=True)
    assert resent.status_code == 200 and "The event is queued for delivery again" in resent.text
    # Queued, not sent from the web request: the page reloads itself until the attempt is made.
    assert len(event_rows.attempts_of(conn, event.id)) == 1 and refresh in resent.text
    assert refresh in console.get(f"/dashboard/processes/{pid}").text
    worker.run_once()
    assert len(event_rows.attempts_of(conn, event.id)) == 2
    shown = console.get(f"/dashboard/processes/{pid}").text
    assert shown.count("Delivery attempt of process.cancelled") == 2 and refresh not in shown
    assert console.post(f"/dashboard/processes/{pid}/events/evt_nope/resend",
                        data={"csrf_token": csrf_of(page.text)}).status_code == 404


# --- Webhooks -------------------------------------------------------------------------------------

def test_webhooks_test_event_and_url(shop_console, shop, receiver, worker, clock):
    console = shop_console
    page = console.get("/dashboard/webhooks")
    assert receiver.url("/hooks/preorder") in page.text
    assert "Every delivery is going through." in page.text
    assert "No test event sent yet." in page.text
    refresh = '<meta http-equiv="refresh" content="2; url=/dashboard/webhooks">'
    sent = console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)},
                        follow_redirects=True)
    # Queued for the delivery worker, not sent by the web request: the page reloads until it is.
    assert sent.status_code == 200 and "Test event queued" in sent.text and refresh in sent.text
    assert "queued for the delivery worker" in sent.text and receiver.requests == []
    again = console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})
    assert again.status_code == 409 and "A test event is already waiting" in again.text
    worker.run_once()
    (delivery,) = receiver.wait_for(1)
    assert json.loads(delivery.body)["type"] == "webhook.test"
    assert delivery.headers["webhook-signature"].startswith("v1,")  # signed like every event
    shown = console.get("/dashboard/webhooks").text
    assert re.search(rf"{re.escape(receiver.url('/hooks/preorder'))}: HTTP 200\s+in \d+ ms", shown)
    assert refresh not in shown and "Every delivery is going through." in shown
    # Sent once: a failure is shown, never retried, and never listed with the failing deliveries.
    receiver.default = Reply(status=500)
    console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})
    worker.run_once()
    clock.advance(3600)
    worker.run_once()
    shown = console.get("/dashboard/webhooks").text
    tests = re.search(r'<section class="panel" id="test-events">(.*?)</section>', shown, re.S)[1]
    assert tests.count("HTTP 500") == 1 and "Every delivery is going through." in shown
    assert len(receiver.requests) == 2
    for url, reason in (("ftp://x", "scheme 'ftp' is not allowed"),
                        ("http://169.254.169.254/latest/meta-data/",
                         "169.254.169.254 (link-local)"),
                        ("http://10.1.2.3:8080/", "10.1.2.3 (private)")):
        saved = console.post("/dashboard/webhooks/url",
                             data={"csrf_token": csrf_of(page.text), "url": url})
        assert saved.status_code == 400
        assert f"The webhook URL is refused: {reason}" in html.unescape(saved.text)
    removed = console.post("/dashboard/webhooks/url",
                           data={"csrf_token": csrf_of(page.text), "url": ""},
                           follow_redirects=True)
    assert "Webhook URL removed." in removed.text
    nothing = console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})
    assert nothing.status_code == 409 and "No webhook URL is set" in nothing.text


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0,5"}])  # two attempts
def test_failing_deliveries_are_listed_and_replayed_with_one_button(shop_console, shop, receiver,
                                                                     worker, clock):
    console = shop_console
    receiver.default = Reply(status=500)
    pids = [shop.api.preorder().get_json()["processId"] for _ in range(2)]
    for pid in pids:
        shop.api.cancel(pid)
    worker.run_once()
    def failing_section():
        page = console.get("/dashboard/webhooks")
        return page, re.search(r'<section class="panel" id="failing">(.*?)</section>', page.text,
                               re.S)[1]

    page, failing = failing_section()
    assert failing.count(">retrying</span>") == 2 and "HTTP 500" in failing
    clock.advance(5)
    worker.run_once()  # the last attempt of the schedule fails too
    page, failing = failing_section()
    assert failing.count(">failed</span>") == 2
    receiver.default = Reply(status=204)
    replayed = console.post("/dashboard/webhooks/replay-failed",
                            data={"csrf_token": csrf_of(page.text)}, follow_redirects=True)
    assert "2 failed event(s) queued for delivery again." in replayed.text
    worker.run_once()
    assert "Every delivery is going through." in console.get("/dashboard/webhooks").text


# --- Notices after a change -----------------------------------------------------------------------

PLANTED = "your account is suspended: call +1 555 0100 and read out your secret key " + "x" * 227


def notices_of(page):
    return re.findall(r'<p class="alert notice" role="status">(.*?)</p>', page.text, re.S)


def test_a_notice_is_one_of_the_service_s_own_texts_chosen_by_its_key(console):
    """The address only selects a notice by its key: no query parameter puts words into it (the
    `warning` that once did is gone), and an unknown key shows nothing."""
    assert len(PLANTED) == 300
    for path, key in (("/dashboard/webhooks", "url-set"), ("/dashboard/payouts", "tolerance"),
                      ("/dashboard/keys", "revoked")):
        for planted in ("warning", "message", "text", "notice", "count"):
            page = console.get(path, query_string={"done": key, planted: PLANTED})
            assert page.status_code == 200
            assert len(notices_of(page)) == 1, (path, planted)
            assert "suspended" not in page.text and "Careful" not in page.text
    for unknown in (PLANTED, "url-set ", "URL-SET", "__class__", "{count}", ""):
        page = console.get("/dashboard/webhooks",
                           query_string={"done": unknown, "warning": PLANTED})
        assert page.status_code == 200 and notices_of(page) == [], unknown
        assert "suspended" not in page.text


def test_a_notice_s_count_is_read_as_ascii_digits(console):
    page = console.get("/dashboard/webhooks?done=replayed&count=3")
    assert notices_of(page) == ["3 failed event(s) queued for delivery again."]
    for count in ("", "x", "-3", "3.0", " 3", "1" * 10, "3" + PLANTED):
        page = console.get("/dashboard/webhooks", query_string={"done": "replayed", "count": count})
        assert page.status_code == 200 and notices_of(page) == [], count
    for count in ("³", "٣", "𝟑", "३", "①", "3٣"):  # "³" raised in int() (a 500), "٣" read as 3
        page = console.get("/dashboard/webhooks", query_string={"done": "replayed", "count": count})
        assert page.status_code == 400, count
        assert "count: Must be written in ASCII characters" in page.text
        assert "queued for delivery again" not in page.text and "Traceback" not in page.text


def test_a_webhook_url_saved_with_a_warning_says_so_in_the_service_s_words(console, monkeypatch):
    """The SSRF guard's warning (a name that does not resolve now) is a notice of its own: the
    redirect carries its key, never the warning's text."""
    from app.webhooks import ssrf

    def unresolvable(*args, **kwargs):
        raise ssrf.Unresolvable("cannot resolve hooks.example (gaierror)")

    page = console.get("/dashboard/webhooks")
    monkeypatch.setattr(ssrf, "check_url", unresolvable)
    saved = console.post("/dashboard/webhooks/url", data={"csrf_token": csrf_of(page.text),
                                                          "url": "https://hooks.example/"})
    assert (saved.status_code, saved.headers["Location"]) == (
        303, "/dashboard/webhooks?done=url-unresolved")
    shown = console.get(saved.headers["Location"])
    assert notices_of(shown) == ["Webhook URL saved, but its host name does not resolve now:"
                                 " deliveries to it are refused until it does (each delivery checks"
                                 " it again)."]


# --- Keys -----------------------------------------------------------------------------------------

def test_roll_the_secret_key_the_old_one_works_until_the_overlap_ends(console, merchant, api,
                                                                      clock):
    page = console.get("/dashboard/keys")
    assert page.status_code == 200 and merchant["secretKey"][:20] + "…" in page.text
    assert merchant["secretKey"] not in page.text  # never shown again
    rolled = console.post("/dashboard/keys/roll", data={"csrf_token": csrf_of(page.text)})
    assert rolled.status_code == 200 and rolled.headers["Cache-Control"] == "no-store"
    new_key = re.search(r'<code id="new-secret-value">(sk_test_\w+)</code>', rolled.text).group(1)
    assert "The previous keys keep working until 2026-11-19 11:06:40 UTC." in rolled.text
    assert "works until 2026-11-19 11:06:40 UTC" in rolled.text
    # the page that made it showed it once
    assert new_key not in console.get("/dashboard/keys").text
    fresh = Api(api.client, new_key)
    assert fresh.list().status_code == 200 and api.list().status_code == 200
    clock.advance(24 * 3600 - 1)
    assert api.list().status_code == 200  # the last second of the overlap
    clock.advance(1)
    assert api.list().status_code == 401 and fresh.list().status_code == 200
    log_in(console, "owner@shop.example")  # 24 h later: the 12-hour session has ended
    assert "expired 2026-11-19 11:06:40 UTC" in console.get("/dashboard/keys").text


def test_roll_the_webhook_secret_signs_with_both_during_the_overlap(shop_console, shop, receiver,
                                                                    worker, clock):
    console = shop_console
    clock.now = int(time.time())  # standardwebhooks checks the timestamp against the real time
    log_in(console, "staff@shop.example")  # a week after the fixture's login: a new session
    page = console.get("/dashboard/keys")
    rolled = console.post("/dashboard/keys/roll-webhook-secret",
                          data={"csrf_token": csrf_of(page.text)})
    new_secret = re.search(r'<code id="new-secret-value">(whsec_[\w+/=]+)</code>',
                           rolled.text).group(1)
    until = datetime.fromtimestamp(clock.now + 24 * 3600, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"until {until}, with the previous one too." in rolled.text
    assert new_secret not in console.get("/dashboard/keys").text
    pid = shop.api.preorder().get_json()["processId"]
    shop.api.cancel(pid)
    worker.run_once()
    (delivery,) = receiver.wait_for(1)
    signatures = delivery.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    for secret in (new_secret, shop.keys["webhookSecret"]):
        Webhook(secret).verify(delivery.body, delivery.headers)


def test_a_viewer_sees_keys_but_cannot_roll_them(client, make_user, merchant, api):
    make_user("viewer@shop.example", merchant["merchantId"], role="viewer")
    log_in(client, "viewer@shop.example")
    page = client.get("/dashboard/keys")
    assert page.status_code == 200 and "Roll secret key" not in page.text
    assert "Roll webhook secret" not in page.text
    assert ">Revoke now</a>" not in page.text
    assert client.post("/dashboard/keys/roll",
                       data={"csrf_token": csrf_of(page.text)}).status_code == 403
    # no token: refused before the role
    assert client.post("/dashboard/keys/roll").status_code == 400
    assert api.list().status_code == 200


def test_no_refund_without_confirmed_money(console, api):
    pid = api.preorder().get_json()["processId"]
    page = console.get(f"/dashboard/processes/{pid}")
    assert ">Refund</a>" not in page.text
    form = console.get(f"/dashboard/processes/{pid}/refund")
    assert form.status_code == 409 and "no confirmed payment to refund" in form.text
    posted = console.post(f"/dashboard/processes/{pid}/refund", data={
        "csrf_token": csrf_of(page.text), "amount": "1", "address": "0x" + "ab" * 20})
    assert posted.status_code == 409 and "has no confirmed payment to refund." in posted.text
    assert console.get(f"/dashboard/processes/{pid}/refunds/rf_{'0' * 32}").status_code == 404


def _pending_refund(api, runner, app, merchant):
    """A completed live payment (its confirmed transfer written as the watcher does) and a pending
    refund of it, made through the API: (process id, refund)."""
    from support.chain_shop import XPUB, cli
    from support.live_payments import USDC_LOCAL, add_transfer

    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    pid = api.preorder({"amount": 10}).get_json()["processId"]
    confirmed = api.client.post(f"/payment-button/process/{pid}/confirm",
                                data=json.dumps({"assetId": "usdc", "networkId": "local"}),
                                content_type="application/json",
                                headers={"x-public-key": merchant["publicKey"]})
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    add_transfer(app, pid, "aa", 0, 10_000_000, 10, "confirmed")
    cli(runner, "processes", "complete", pid)
    refund = api.client.post(f"/payment-button/process/{pid}/refunds", headers=api.headers(),
                             data=json.dumps({"amount": 4, "address": "0x" + "ab" * 20}),
                             content_type="application/json")
    assert refund.status_code == 200, refund.get_data(as_text=True)
    return pid, refund.get_json()


def test_the_refund_page_takes_the_hash_of_the_transaction_that_paid_it(
        client, console, api, runner, app, merchant, make_user):
    pid, refund = _pending_refund(api, runner, app, merchant)
    path = f"/dashboard/processes/{pid}/refunds/{refund['refundId']}"
    page = console.get(path)
    assert page.status_code == 200 and 'name="tx_hash"' in page.text
    assert '<label for="tx-hash">Transaction hash</label>' in page.text
    token = csrf_of(page.text)
    bad = console.post(path + "/transaction", data={"csrf_token": token, "tx_hash": "0x1234"})
    assert bad.status_code == 400
    assert "Must be 0x followed by 64 hexadecimal digits (the transaction&#39;s hash)." in bad.text
    assert 'value="0x1234"' in bad.text  # kept in the field to be corrected
    assert console.post(path + "/transaction",
                        data={"tx_hash": "0x" + "ab" * 32}).status_code == 400
    tx_hash = "0x" + "AB" * 32
    named = console.post(path + "/transaction",
                         data={"csrf_token": token, "tx_hash": f" {tx_hash} "},
                         follow_redirects=True)
    assert named.status_code == 200
    assert ("The transaction is named for this refund: it completes once that transaction is"
            " confirmed.") in named.text
    assert f'<span class="mono wrap" id="named-tx">{tx_hash.lower()}</span>' in named.text
    shown = api.client.get(f"/payment-button/process/{pid}/refunds", headers=api.headers())
    assert shown.get_json()["data"][0]["txHash"] == tx_hash.lower()

    make_user("viewer@shop.example", merchant["merchantId"], role="viewer")
    viewer = app.test_client()
    log_in(viewer, "viewer@shop.example")
    seen = viewer.get(path)
    assert seen.status_code == 200 and 'name="tx_hash"' not in seen.text
    assert tx_hash.lower() in seen.text  # a viewer sees the named hash, not the form
    forged = viewer.post(path + "/transaction", data={"csrf_token": csrf_of(seen.text),
                                                      "tx_hash": "0x" + "cd" * 32})
    assert forged.status_code == 403
    assert api.client.get(f"/payment-button/process/{pid}/refunds",
                          headers=api.headers()).get_json()["data"][0]["txHash"] == tx_hash.lower()


def test_payouts_page_without_a_payout_address_or_wallet(console, merchant, runner):
    page = console.get("/dashboard/payouts")
    assert page.status_code == 200
    assert "No payout address and no wallet is registered yet" in page.text
    assert f"merchants set-payout {merchant['merchantId']} ADDRESS" in page.text
    result = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"],
                                 "0x" + "ab" * 20, "--unchecked"])  # no checksum: taken only so
    assert result.exit_code == 0, result.output
    page = console.get("/dashboard/payouts")
    assert "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB" in page.text  # EIP-55 form
    assert 'class="panel network"' not in page.text  # no network has a forwarder factory
    assert 'on the <a href="/dashboard/settings#payout">settings page</a>' in page.text


def test_the_settings_page_holds_every_setting_a_viewer_reads_them_only(console, client, runner,
                                                                         merchant):
    page = console.get("/dashboard/settings")
    assert page.status_code == 200
    assert '<a href="/dashboard/settings">Settings</a>' in page.text  # in the navigation
    headings = re.findall(r'<section class="panel" id="([\w-]+)">\s*<h2>([^<]+)</h2>', page.text)
    assert headings == [("display-name", "Display name"), ("currency", "Currency"),
                        ("tolerance", "Underpayment tolerance"), ("payout", "Payout address")]
    for form in ("display-name", "currency", "tolerance", "payout"):
        assert f'action="/dashboard/settings/{form}"' in page.text
    payouts_page = console.get("/dashboard/payouts").text
    assert "Underpayment tolerance" not in payouts_page and 'name="address"' not in payouts_page
    console.post("/dashboard/logout", data={"csrf_token": csrf_of(page.text)})
    created = runner.invoke(args=["users", "create", "viewer@shop.example", "--merchant",
                                  merchant["merchantId"], "--role", "viewer"],
                            input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    login = client.get("/dashboard/login")
    client.post("/dashboard/login", data={"email": "viewer@shop.example", "password": PASSWORD,
                                          "csrf_token": csrf_of(login.text)})
    seen = client.get("/dashboard/settings")
    assert seen.status_code == 200 and "<strong>0 %</strong>" in seen.text
    assert '<strong id="merchant-currency">USD</strong>' in seen.text
    assert "<form method=\"post\" action=\"/dashboard/settings/" not in seen.text


def test_revoke_now_an_old_secret_key_after_a_roll(console, merchant, api):
    """A leaked key: roll, then "Revoke now" the old one (after a confirmation): 401 at once."""
    # the only working key: roll first
    assert ">Revoke now</a>" not in console.get("/dashboard/keys").text
    page = console.get("/dashboard/keys/roll")
    assert page.status_code == 200 and "Roll the secret key?" in page.text
    assert api.list().status_code == 200
    rolled = console.post("/dashboard/keys/roll", data={"csrf_token": csrf_of(page.text)})
    fresh = Api(api.client, re.search(r'<code id="new-secret-value">(sk_test_\w+)</code>',
                                      rolled.text)[1])
    page = console.get("/dashboard/keys")
    links = re.findall(r'href="(/dashboard/keys/(\d+)/revoke)" aria-label="Revoke (\S+)… now"',
                       page.text)
    assert {label for _, _, label in links} == {merchant["secretKey"][:20], fresh.secret_key[:20]}
    old = next(link for link, _, label in links if label == merchant["secretKey"][:20])
    confirm = console.get(old)
    assert f"Revoke key {merchant['secretKey'][:20]}… now?" in confirm.text
    assert api.list().status_code == 200
    revoked = console.post(old, data={"csrf_token": csrf_of(confirm.text)})
    assert (revoked.status_code, revoked.headers["Location"]) == (
        303, "/dashboard/keys?done=revoked")
    assert api.list().status_code == 401 and fresh.list().status_code == 200
    shown = console.get(revoked.headers["Location"]).text
    assert "The key is revoked: it stopped working now." in shown and "revoked 2026-" in shown
    assert ">Revoke now</a>" not in shown  # one working key left
    last = re.findall(r"/dashboard/keys/(\d+)/revoke", page.text)
    refused = [console.post(f"/dashboard/keys/{n}/revoke", data={"csrf_token": csrf_of(shown)})
               for n in last]
    assert sorted(r.status_code for r in refused) == [409, 409]
    assert fresh.list().status_code == 200
    assert console.get("/dashboard/keys/999999/revoke").status_code == 404


# --- Overview and the money on each row -----------------------------------------------------------

DAI_LOCAL = "0x" + "D1" * 20
DAY = 86_400


def _live_shop(api, runner, app, merchant):
    """A network with USDC (6 decimals) and DAI (18) and the merchant's wallet: confirm(pid,
    asset)."""
    from support.chain_shop import XPUB, cli
    from support.live_payments import USDC_LOCAL

    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    for asset, symbol, contract, decimals in (("usdc", "USDC", USDC_LOCAL, "6"),
                                              ("dai", "DAI", DAI_LOCAL, "18")):
        cli(runner, "assets", "add", asset, "--network", "local", "--symbol", symbol,
            "--name", symbol, "--contract", contract, "--decimals", decimals,
            "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)

    def order(amount, asset):
        pid = api.preorder({"amount": amount}).get_json()["processId"]
        confirmed = api.client.post(f"/payment-button/process/{pid}/confirm",
                                    content_type="application/json",
                                    data=json.dumps({"assetId": asset, "networkId": "local"}),
                                    headers={"x-public-key": merchant["publicKey"]})
        assert confirmed.status_code == 200, confirmed.text
        return pid
    return order


def _paid(app, pid, tx, amount, when, token=None):
    """A confirmed transfer, recorded as the chain watcher records one (the overview's sums too)."""
    from support.live_payments import USDC_LOCAL

    from app.core.records import Transfer
    from app.data import transfers as transfer_rows
    with app.extensions["db"].transaction() as conn:
        transfer_rows.record(conn, Transfer(
            chain_id=31337, tx_hash="0x" + tx * 32, log_index=0, network_id="local", process_id=pid,
            token_contract=token or USDC_LOCAL, from_address="0x" + "ab" * 20, amount=amount,
            block_number=10, block_hash="0x" + "cd" * 32, block_timestamp=when, status="confirmed",
            seen_at=when, confirmed_at=when))


def test_overview_and_the_money_on_every_row(console, api, runner, app, merchant, clock,
                                             make_shop):
    order = _live_shop(api, runner, app, merchant)
    now = clock.now
    paid = order(10, "usdc")
    _paid(app, paid, "a1", 10_000_000, now)
    runner.invoke(args=["processes", "complete", paid])
    partly = order(10, "usdc")
    _paid(app, partly, "a2", 4_000_000, now - 2 * DAY)
    with dbutil.connect(app.config["DATABASE"]) as conn:  # the watcher's report of it
        conn.execute("INSERT INTO events (id, merchant_id, process_id, type, payload, created_at)"
                     " VALUES ('evt_partly', ?, ?, 'payment.partial', '{}', ?)",
                     (merchant["merchantId"], partly, now - 2 * DAY))
    big = [order(9, "dai") for _ in range(2)]  # 9 * 10^18 each: their sum is past 2^63
    for n, pid in enumerate(big):
        _paid(app, pid, f"b{n}", 9 * 10 ** 18, now - 10 * DAY, DAI_LOCAL)
    sandbox = api.preorder({"amount": 2.5}).get_json()["processId"]
    assert api.client.post(f"/payment-button/process/{sandbox}/sandbox/pay",
                           json={"outcome": "success"},
                           headers={"x-public-key": merchant["publicKey"]}).status_code == 200
    refund = api.client.post(f"/payment-button/process/{paid}/refunds", headers=api.headers(),
                             json={"amount": 4, "address": "0x" + "ab" * 20}).get_json()
    from app.data import overview as overview_rows
    # paid and settled; the sums as init-db builds them
    with app.extensions["db"].transaction() as conn:
        conn.execute("UPDATE refunds SET status = 'completed', updated_at = ?, tx_hash = ?,"
                     " log_index = 0 WHERE id = ?", (now, "0x" + "ee" * 32, refund["refundId"]))
        overview_rows.rebuild(conn)

    page = console.get("/dashboard/overview")
    assert page.status_code == 200
    usdc = re.search(r'<article class="asset-figures" id="asset-usdc">(.*?)</article>', page.text,
                     re.S)[1]
    figures = re.findall(r'<td class="num" data-label="[^"]+"><a href="([^"]+)">([^<]+)</a>', usdc)
    assert [text for _, text in figures] == ["10", "14", "14", "4", "4", "4"]  # paid; refunded
    today = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
    assert html.unescape(figures[0][0]) == f"/dashboard/?money=paid&asset=usdc&from={today}"
    dai = re.search(r'id="asset-dai">(.*?)</article>', page.text, re.S)[1]
    assert re.findall(r'data-label="[^"]+"><a href="[^"]+">([^<]+)</a>', dai)[:3] == [
        "0", "0", "18"]
    assert usdc.count('<rect x=') == 30 and "<svg" in usdc  # the chart: one bar per day
    axis = [(datetime.fromtimestamp(now, UTC) - timedelta(days=d)).strftime("%m-%d")
            for d in (29, 15, 0)]
    assert ('<div class="chart-x" aria-hidden="true">' + "".join(f"<span>{d}</span>" for d in axis)
            + "</div>") in usdc
    # the highest day
    assert ('<div class="chart-y" aria-hidden="true"><span>10</span><span>0</span></div>'
            in usdc)
    sandbox_panel = re.search(r'<section class="panel" id="sandbox">(.*?)</section>', page.text,
                              re.S)[1]
    assert "Sandbox payments" in sandbox_panel
    assert ">$2.50</a> <span class=\"hint\">(1)</span>" in sandbox_panel
    assert '<strong id="partly-paid">1</strong>' in page.text
    from app.domain import overview
    overview.PARTLY_MAX, kept = 0, overview.PARTLY_MAX  # past the count looked at: "at least"
    try:
        assert '<strong id="partly-paid">0+</strong>' in console.get("/dashboard/overview").text
    finally:
        overview.PARTLY_MAX = kept
    counts = re.findall(r'<a href="/dashboard/\?status=(\w+)&amp;from=[-\d]+">'
                        r'<span class="badge badge-\w+">\w+</span> <strong>(\d+)</strong>',
                        page.text)
    assert counts == [("pending", "3"), ("completed", "2"), ("cancelled", "0"), ("expired", "0")]
    assert '<strong id="failing-count">0</strong>' in page.text
    other = make_shop()  # another merchant's payment: its transfers are then told apart by a join
    theirs = other.api.preorder({"amount": 10}).get_json()["processId"]
    with dbutil.connect(app.config["DATABASE"]) as conn:
        conn.execute("INSERT INTO payments (process_id, merchant_id, address_index, address,"
                     " asset_id, network_id, chain_id, token_contract, decimals, amount_due,"
                     " created_at, updated_at)"
                     " SELECT ?, ?, 0, ?, asset_id, network_id, chain_id, token_contract, decimals,"
                     " amount_due, created_at, updated_at FROM payments WHERE process_id = ?",
                     (theirs, other.keys["merchantId"], "0x" + "77" * 20, paid))
    _paid(app, theirs, "c1", 10_000_000, now)
    again = console.get("/dashboard/overview").text
    usdc_again = re.search(r'id="asset-usdc">(.*?)</article>', again, re.S)[1]
    assert re.findall(r'data-label="[^"]+"><a href="[^"]+">([^<]+)</a>', usdc_again) == [
        t for _, t in figures]

    assert listed(console.get("/dashboard/?money=partly").text) == [partly]
    assert listed(console.get("/dashboard/?money=refunded").text) == [paid]
    assert listed(console.get("/dashboard/?asset=dai").text) == big[::-1]
    assert listed(console.get(f"/dashboard/?money=partly&q={partly}").text) == [partly]
    assert listed(console.get(f"/dashboard/?money=partly&q={paid}").text) == []
    rows = console.get("/dashboard/").text
    row = re.search(rf'<tr>\s*<td data-label="Process"><a class="mono"'
                    rf' href="/dashboard/processes/{partly}".*?</tr>', rows, re.S)[0]
    assert "partly paid</span>" in row and '<td class="num paid" data-label="Paid">4</td>' in row
    assert "USDC <span class=\"hint\">on Local chain</span>" in row
    exported = {r["processId"]: r for r in csv.DictReader(io.StringIO(
        console.get("/dashboard/processes.csv").text))}
    assert (exported[paid]["amount"], exported[paid]["amountDue"], exported[paid]["amountPaid"],
            exported[paid]["amountRefunded"], exported[paid]["marks"]) == (
        "10.00", "10.00", "10.00", "4.00", "partly refunded")
    assert (exported[partly]["amountPaid"], exported[partly]["marks"]) == ("4.00", "partly paid")
    assert exported[big[0]]["amountPaid"] == "9.00" and exported[sandbox]["amountPaid"] == ""


def test_an_overpaid_process_is_marked_filtered_and_counted_on_the_overview(console, api, runner,
                                                                          app, merchant, clock):
    order = _live_shop(api, runner, app, merchant)
    now = clock.now
    exact, over, twice = order(10, "usdc"), order(10, "usdc"), order(10, "usdc")
    _paid(app, exact, "a1", 10_000_000, now)
    _paid(app, over, "a2", 10_000_001, now - DAY)  # one unit more than due
    _paid(app, twice, "a3", 6_000_000, now)  # two transfers, together above what is due
    _paid(app, twice, "a4", 6_000_000, now)
    page = console.get("/dashboard/overview")
    assert page.status_code == 200
    assert '<strong id="overpaid">2</strong>' in page.text
    since = (datetime.fromtimestamp(now, UTC) - timedelta(days=29)).strftime("%Y-%m-%d")
    assert (f'<a href="/dashboard/?money=overpaid&amp;from={since}">'
            '<span class="badge mark">overpaid</span>') in page.text
    assert listed(console.get("/dashboard/?money=overpaid").text) == [twice, over]
    assert listed(console.get(f"/dashboard/?money=overpaid&q={exact}").text) == []
    assert listed(console.get(f"/dashboard/?money=overpaid&q={over}").text) == [over]
    assert ('<option value="overpaid" selected>Overpaid</option>'
            in console.get("/dashboard/?money=overpaid").text)
    rows = console.get("/dashboard/").text
    marks = {pid: re.findall(r'<span class="badge mark">([^<]+)</span>',
                             re.search(rf'href="/dashboard/processes/{pid}".*?</tr>', rows,
                                       re.S)[0])
             for pid in (exact, over, twice)}
    assert marks == {exact: [], over: ["overpaid"], twice: ["overpaid"]}
    exported = {r["processId"]: r for r in csv.DictReader(io.StringIO(
        console.get("/dashboard/processes.csv").text))}
    assert [exported[pid]["marks"] for pid in (exact, over, twice)] == ["", "overpaid", "overpaid"]


# one attempt, then failed
@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0"}])
def test_webhooks_page_lists_recent_events_of_every_kind_filtered_by_type_and_state(
        shop_console, shop, receiver, worker):
    console = shop_console
    cancelled = shop.api.preorder().get_json()["processId"]
    shop.api.cancel(cancelled)
    worker.run_once()  # delivered
    receiver.default = Reply(status=500)
    failed = shop.api.preorder().get_json()["processId"]
    shop.api.cancel(failed)
    worker.run_once()  # its one attempt fails
    page = console.get("/dashboard/webhooks")
    console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})  # queued

    def rows(query=""):
        text = console.get("/dashboard/webhooks" + query).text
        section = re.search(r'<section class="panel" id="events">(.*?)</section>', text, re.S)[1]
        return [(kind, state) for kind, state in re.findall(
            r'<code>([\w.]+)</code></td>.*?<span class="badge badge-\w+">([\w ]+)</span>', section,
            re.S)]

    assert rows() == [("webhook.test", "pending"), ("process.cancelled", "failed"),
                      ("process.cancelled", "delivered")]
    assert rows("?state=failed") == [("process.cancelled", "failed")]
    assert rows("?state=failing") == [("process.cancelled", "failed")]
    assert rows("?type=webhook.test") == [("webhook.test", "pending")]
    assert rows("?type=process.cancelled&state=delivered") == [("process.cancelled", "delivered")]
    assert "HTTP 500" in console.get("/dashboard/webhooks?state=failed").text
    assert console.get("/dashboard/webhooks?state=nope").status_code == 400


@pytest.mark.parametrize("amounts", [
    ["900000000000000000"] * 11,  # 18 digits each: their sum passes 2^63 (SQLite's sum() raises)
    ["1" + "0" * 30, "7",
     "123456789012345678901234567890123456789012345678901234567890123456789012345678"],
    ["5", "10", "0"],
])
def test_sums_in_sql_are_exact_on_both_backends(app, amounts):
    from app.data import overview as overview_rows
    rows = " UNION ALL ".join(f"SELECT '{a}' AS a" for a in amounts)
    with app.app_context():
        conn = app.extensions["db"].connection()
        [(key, total)] = overview_rows._sum(
            conn, f"SELECT 1, {{sums}} FROM ({rows}) AS x GROUP BY 1", (), "a", 1)
    assert (key, total) == (1, sum(int(a) for a in amounts))
