"""Payment links through the merchant API and the CLI (docs/api.md, "Payment links"): the Link
object, its validation, paging, another merchant's link is 404, deactivation; processes made from a
link (app/domain/links.py open_process) carry its price, description, success URL and metadata
with `paymentLinkId`, and count in its `payments` once completed."""
import json

import pytest
from support.helpers import Api, assert_error

from app.domain import links


def create(api, **body):
    body.setdefault("amount", 25)
    body.setdefault("description", "Pottery class, Saturday")
    return api.client.post("/payment-button/links", json=body, headers=api.headers())


def click(app, link_id, client="203.0.113.7", now=None):
    db = app.extensions["db"]
    return links.open_process(db, link_id, client=client, now=now or app.config["CLOCK"](),
                              ttl=1800, per_minute=app.config["LINK_PROCESSES_PER_MINUTE"],
                              checkout_base="https://pay.example.com")


def test_a_link_is_created_and_shown(api, clock):
    made = create(api, amount=19.90, currency="EUR", metadata={"sku": "CLS-1"},
                  successUrl="https://shop.test/thanks", maxPayments=3,
                  expiresAt="2026-12-24T18:00:00Z")
    assert made.status_code == 200, made.text
    link = made.get_json()
    assert link["linkId"].startswith("link_") and len(link["linkId"]) == 29
    assert link == {
        "linkId": link["linkId"], "url": f"http://localhost/l/{link['linkId']}", "amount": 19.9,
        "currency": "EUR", "description": "Pottery class, Saturday", "metadata": {"sku": "CLS-1"},
        "successUrl": "https://shop.test/thanks", "maxPayments": 3, "payments": 0, "active": True,
        "expiresAt": "2026-12-24T18:00:00Z", "createdAt": "2026-11-18T11:06:40Z"}
    raw = api.client.post("/payment-button/links", data=b'{"amount": 19.90, "description": "x"}',
                          content_type="application/json", headers=api.headers())
    assert '"amount":19.90,' in raw.text  # the digits as sent
    got = api.client.get(f"/payment-button/links/{link['linkId']}", headers=api.headers())
    assert got.get_json() == link


def test_a_link_takes_the_merchants_currency(api, runner, merchant):
    runner.invoke(args=["merchants", "set-currency", merchant["merchantId"], "JPY"])
    assert create(api, amount=1200).get_json()["currency"] == "JPY"
    assert_error(create(api, amount=12.5), 400, "validation_error",
                 "amount: Must have at most 0 decimal places (JPY).")


@pytest.mark.parametrize("field, value, message", [
    ("description", None, "Must not be null."),
    ("description", "", "Length must be between 1 and 250."),
    ("maxPayments", 0, "Must be a whole number from 1 to 1,000,000,000, or null."),
    ("maxPayments", 1.5, "Must be a whole number from 1 to 1,000,000,000, or null."),
    ("expiresAt", "2026-12-24", "Must be a UTC time as YYYY-MM-DDTHH:MM:SSZ."),
    ("expiresAt", "2026-11-18T11:06:40Z", "Must be in the future."),
    ("successUrl", "ftp://x", "Must be an absolute https:// URL (http:// in test mode) of at most"
                              " 2,048 characters."),
    ("currency", "EURO", None),
    ("colour", "red", "Unknown field."),
])
def test_bad_fields_are_refused_naming_them(api, field, value, message):
    response = create(api, **{field: value})
    assert_error(response, 400, "validation_error")
    assert list(response.get_json()["errors"]) == [field]
    if message:
        assert response.get_json()["errors"][field] == [message]


def test_links_are_paged_newest_first_and_another_merchants_is_404(api, clock, client,
                                                                    make_merchant):
    ids = []
    for _ in range(3):
        ids.append(create(api).get_json()["linkId"])
        clock.now += 1
    first = api.client.get("/payment-button/links?limit=2", headers=api.headers()).get_json()
    assert [link["linkId"] for link in first["data"]] == ids[::-1][:2] and first["hasMore"] is True
    rest = api.client.get(f"/payment-button/links?limit=2&starting_after={ids[1]}",
                          headers=api.headers()).get_json()
    assert [link["linkId"] for link in rest["data"]] == [ids[0]] and rest["hasMore"] is False
    other = Api(client, make_merchant(name="Other")["secretKey"])
    for path in (f"/payment-button/links/{ids[0]}", "/payment-button/links/nope"):
        assert_error(other.client.get(path, headers=other.headers()), 404, "not_found",
                     "No such link.")
    assert_error(other.client.post(f"/payment-button/links/{ids[0]}/deactivate",
                                   headers=other.headers()), 404, "not_found")
    assert_error(other.client.get(f"/payment-button/links?starting_after={ids[0]}",
                                  headers=other.headers()), 400, "validation_error")


def test_a_click_makes_a_process_of_the_link_and_it_counts_once_paid(api, app, merchant, clock):
    link = create(api, amount=19.90, currency="EUR", metadata={"sku": "CLS-1"},
                  successUrl="https://shop.test/thanks").get_json()
    process = click(app, link["linkId"])
    shown = api.get(process.id).get_json()
    assert (shown["amount"], shown["currency"], shown["description"], shown["successUrl"]) == (
        19.9, "EUR", "Pottery class, Saturday", "https://shop.test/thanks")
    assert shown["metadata"] == {"sku": "CLS-1", "paymentLinkId": link["linkId"]}
    assert shown["checkoutUrl"] == f"https://pay.example.com/checkout/{process.id}"
    paid = api.client.post(f"/payment-button/process/{process.id}/sandbox/pay",
                           json={"outcome": "success"},
                           headers={"x-public-key": merchant["publicKey"]})
    assert paid.status_code == 200
    assert api.client.get(f"/payment-button/links/{link['linkId']}",
                          headers=api.headers()).get_json()["payments"] == 1


def test_what_makes_a_link_unavailable_makes_no_process(api, app, merchant, clock):
    def processes():
        return len(api.list("?limit=100").get_json()["data"])

    sold = create(api, maxPayments=1).get_json()["linkId"]
    first = click(app, sold)
    api.client.post(f"/payment-button/process/{first.id}/sandbox/pay", json={"outcome": "success"},
                    headers={"x-public-key": merchant["publicKey"]})
    expiring = create(api, expiresAt="2026-11-18T11:07:00Z").get_json()["linkId"]
    stopped = create(api).get_json()["linkId"]
    deactivated = api.client.post(f"/payment-button/links/{stopped}/deactivate",
                                  headers=api.headers())
    assert deactivated.status_code == 200 and deactivated.get_json()["active"] is False
    clock.now += 20
    before = processes()
    for link_id, why in ((sold, "sold out"), (expiring, "expired"), (stopped, "deactivated")):
        with pytest.raises(links.LinkUnavailable) as refused:
            click(app, link_id)
        assert refused.value.reason == why
    assert processes() == before


def test_one_client_makes_at_most_the_limit_a_minute_from_one_link(api, app, clock):
    link_id = create(api).get_json()["linkId"]
    for _ in range(app.config["LINK_PROCESSES_PER_MINUTE"]):
        click(app, link_id)
    with pytest.raises(links.TooManyProcesses) as limited:
        click(app, link_id)
    assert limited.value.retry_after == 60
    click(app, link_id, client="198.51.100.4")  # another client address: its own count
    clock.now += 59
    with pytest.raises(links.TooManyProcesses):
        click(app, link_id)
    clock.now += 1
    click(app, link_id)


def test_the_cli_creates_lists_and_deactivates(runner, merchant):
    made = runner.invoke(args=["links", "create", merchant["merchantId"], "--amount", "12.50",
                               "--description", "Gift card", "--json"])
    assert made.exit_code == 0, made.output
    link = json.loads(made.output)
    assert (link["amount"], link["url"]) == (12.5, f"/l/{link['linkId']}")
    listed = runner.invoke(args=["links", "list", merchant["merchantId"]])
    assert link["linkId"] in listed.output and "12.50 USD" in listed.output
    gone = runner.invoke(args=["links", "deactivate", link["linkId"]])
    assert gone.exit_code == 0 and "Deactivated" in gone.output
    assert "deactivated" in runner.invoke(args=["links", "list", merchant["merchantId"]]).output
    bad = runner.invoke(args=["links", "create", merchant["merchantId"], "--amount", "1.005",
                              "--description", "x"])
    assert bad.exit_code == 1 and "decimal places" in bad.output
    named = runner.invoke(args=["merchants", "set-display-name", merchant["merchantId"],
                                "Clay Studio"])
    assert named.exit_code == 0 and "Clay Studio" in named.output
