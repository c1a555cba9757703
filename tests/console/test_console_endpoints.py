"""The console's webhooks page with several endpoints: an owner adds (the secret shown once),
edits, disables, enables, rolls, deletes and sends a test event to one endpoint; a viewer sees the
list and no control; the event log filters by endpoint."""
import html
import re
import time

import pytest
from standardwebhooks.webhooks import Webhook
from support.console import csrf_of, log_in, log_in_as
from support.helpers import FakeClock

from app.domain import endpoints

EVENTS = ("payment.completed", "refund.created")


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


@pytest.fixture
def console(runner, client, shop):
    return log_in(runner, client, shop.keys)


def post(console, path, **form):
    token = csrf_of(console.get("/dashboard/webhooks").text)
    return console.post("/dashboard/webhooks" + path, data={"csrf_token": token, **form})


def listed(app, shop):
    return endpoints.list_of(app.extensions["db"], shop.id)


def test_an_owner_adds_edits_disables_rolls_and_deletes_endpoints(app, console, shop, receiver):
    page = console.get("/dashboard/webhooks")
    assert page.status_code == 200
    for label in ('<label for="url-new">URL</label>', "<legend>Events</legend>",
                  '<label for="description-new">Description</label>'):
        assert label in page.text
    forged = console.post("/dashboard/webhooks/endpoints", data={"url": receiver.url("/x"),
                                                                   "events": "*"})
    assert forged.status_code == 400 and len(listed(app, shop)) == 1  # no CSRF token: refused
    added = post(console, "/endpoints", url=receiver.url("/books"), events=list(EVENTS),
                 description="Bookkeeping")
    assert added.status_code == 200 and added.headers["Cache-Control"] == "no-store"
    secret = re.search(r'<code id="new-secret-value">(whsec_[\w+/=]+)</code>', added.text)[1]
    assert "Endpoint added: Bookkeeping" in added.text
    first, books = listed(app, shop)
    assert (books.url, books.events, books.description, books.secret) == (
        receiver.url("/books"), EVENTS, "Bookkeeping", secret)
    assert secret not in console.get("/dashboard/webhooks").text  # shown once

    edited = post(console, f"/endpoints/{books.id}", url=receiver.url("/ledger"), events="*",
                  description="")
    assert (edited.status_code, edited.headers["Location"]) == (
        303, "/dashboard/webhooks?done=endpoint-saved")
    books = listed(app, shop)[1]
    assert (books.url, books.events, books.description) == (receiver.url("/ledger"), ("*",), None)
    refused = post(console, f"/endpoints/{books.id}", url="http://10.1.2.3/x", events="*")
    assert refused.status_code == 400
    assert "The webhook URL is refused: 10.1.2.3 (private)" in html.unescape(refused.text)
    none = post(console, f"/endpoints/{books.id}", url=receiver.url("/x"))  # no box ticked
    assert none.status_code == 400 and "Name at least one event type" in html.unescape(none.text)

    for action, state in (("disable", False), ("enable", True)):
        done = post(console, f"/endpoints/{books.id}/{action}")
        assert done.headers["Location"] == f"/dashboard/webhooks?done=endpoint-{action}d"
        assert listed(app, shop)[1].enabled is state
    rolled = post(console, f"/endpoints/{books.id}/roll-secret")
    new = re.search(r'<code id="new-secret-value">(whsec_[\w+/=]+)</code>', rolled.text)[1]
    assert listed(app, shop)[1].signing_secrets(int(time.time())) == [new, secret]  # overlap
    assert post(console, f"/endpoints/{books.id}/delete").headers["Location"] == (
        "/dashboard/webhooks?done=endpoint-deleted")
    assert [e.id for e in listed(app, shop)] == [first.id]
    assert post(console, f"/endpoints/{books.id}/enable").status_code == 404
    assert post(console, f"/endpoints/{first.id}/frobnicate").status_code == 404


def test_a_test_event_goes_to_the_endpoint_chosen_and_the_log_filters_by_endpoint(
        app, console, shop, receiver, worker):
    second = endpoints.create(app.extensions["db"], shop_merchant(app, shop),
                              url=receiver.url("/second"), now=time.time(),
                              events=("refund.created",), allow_loopback=True)[0]
    sent = post(console, f"/endpoints/{second.id}/test")
    assert sent.headers["Location"] == "/dashboard/webhooks?done=test"
    shop.cancelled()  # process.cancelled: to the first endpoint only
    worker.run_once()
    got = {r.path: r for r in receiver.wait_for(2)}
    assert sorted(got) == ["/hooks/preorder", "/second"]
    Webhook(second.secret).verify(got["/second"].body, got["/second"].headers)

    page = console.get(f"/dashboard/webhooks?endpoint={second.id}")
    assert page.status_code == 200 and f'<option value="{second.id}" selected>' in page.text
    events = re.search(r'<table class="events cards">(.*?)</table>', page.text, re.S)[1]
    assert "webhook.test" in events and "process.cancelled" not in events
    assert console.get("/dashboard/webhooks?endpoint=we_nope").status_code == 400


def shop_merchant(app, shop):
    from app.domain import merchants

    return merchants.get(app.extensions["db"], shop.id)


def test_a_viewer_sees_the_endpoints_and_no_control(runner, client, app, shop, receiver):
    runner.invoke(args=["users", "create", "viewer@shop.example", "--merchant", shop.id, "--role",
                        "viewer"], input="correct horse battery\n")
    log_in_as(client, "viewer@shop.example")
    page = client.get("/dashboard/webhooks")
    assert page.status_code == 200 and receiver.url("/hooks/preorder") in page.text
    for control in ("Add endpoint", "Roll secret", ">Delete<", ">Disable<", "Send test event"):
        assert control not in page.text
    [first] = listed(app, shop)
    token = csrf_of(page.text)
    for path in ("/endpoints", f"/endpoints/{first.id}/delete", f"/endpoints/{first.id}"):
        assert client.post("/dashboard/webhooks" + path,
                           data={"csrf_token": token}).status_code == 403


def test_another_merchants_endpoint_is_a_404(app, console, make_shop, receiver):
    other = make_shop(webhook_url=receiver.url("/other"))
    [theirs] = listed(app, other)
    for action in ("delete", "disable", "test", "roll-secret"):
        assert post(console, f"/endpoints/{theirs.id}/{action}").status_code == 404
    assert listed(app, other)[0].enabled is True
