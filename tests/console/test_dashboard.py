"""The merchant console over HTTP (Flask test client, real database): users CLI, login, throttling
and lock-out (injected clock), sessions, CSRF, roles, security headers, the processes list, search,
CSV export, one process's page and actions, webhooks. Chromium tests: tests/console/test_dashboard_browser.py."""
import csv
import html
import io
import json
import re
import time
from datetime import datetime, timezone

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
        result = runner.invoke(args=["users", "create", email, "--merchant", merchant_id, "--role", role],
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
    assert response.status_code == 303 and response.headers["Location"] == "/dashboard/"
    return client


def form_token(client, path="/dashboard/"):
    return csrf_of(client.get(path).text)


# --- Users CLI ---------------------------------------------------------------------------------------

def test_users_cli_creates_lists_disables_and_sets_passwords(runner, merchant, make_user, client):
    make_user("Ann@Shop.example", merchant["merchantId"], role="viewer")
    listed = runner.invoke(args=["users", "list"])
    assert listed.exit_code == 0
    assert re.search(r"ann@shop\.example\s+mer_\w+\s+viewer\s+active", listed.output)
    again = runner.invoke(args=["users", "create", "ann@shop.example", "--merchant", merchant["merchantId"]],
                          input=PASSWORD + "\n")
    assert again.exit_code == 1 and "exists already" in again.output
    short = runner.invoke(args=["users", "create", "bob@shop.example", "--merchant", merchant["merchantId"]],
                          input="short\n")
    assert short.exit_code == 1 and "at least 10 characters" in short.output
    unknown = runner.invoke(args=["users", "create", "bob@shop.example", "--merchant", "mer_nope"],
                            input=PASSWORD + "\n")
    assert unknown.exit_code == 1 and "No merchant mer_nope" in unknown.output

    assert log_in(client, "ann@shop.example").status_code == 303
    assert client.get("/dashboard/").status_code == 200
    changed = runner.invoke(args=["users", "set-password", "ann@shop.example"], input="another long one\n")
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


# --- Login, sessions, lock-out ------------------------------------------------------------------------

def test_logged_out_visitor_is_sent_to_login_and_the_cookie_is_safe(client, owner):
    assert client.get("/dashboard/").headers["Location"] == "/dashboard/login"
    page = client.get("/dashboard/login")
    assert page.status_code == 200
    assert 'for="email">Email</label>' in page.text and 'for="password">Password</label>' in page.text
    response = log_in(client, owner)
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("console_session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
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
    for path in ("/dashboard/", "/dashboard/login", f"/dashboard/processes/{pid}", "/dashboard/webhooks",
                 "/dashboard/nope", "/dashboard/processes.csv"):
        response = console.get(path)
        csp = response.headers["Content-Security-Policy"]
        assert CSP.search(csp) and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp, path
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "no-store"
    css = console.get("/dashboard/static/console.css")
    assert css.status_code == 200 and css.mimetype == "text/css"
    assert "<script>" not in console.get("/dashboard/").text  # scripts only from files


# --- Roles and merchants ------------------------------------------------------------------------------

def test_a_viewer_sees_no_buttons_and_a_forged_post_is_refused(client, make_user, merchant, api):
    pid = api.preorder().get_json()["processId"]
    make_user("viewer@shop.example", merchant["merchantId"], role="viewer")
    log_in(client, "viewer@shop.example")
    page = client.get(f"/dashboard/processes/{pid}")
    assert page.status_code == 200 and ">Cancel</button>" not in page.text
    token = csrf_of(page.text)  # its logout form's token: a valid token of this session
    response = client.post(f"/dashboard/processes/{pid}/cancel", data={"csrf_token": token})
    assert response.status_code == 403 and "viewer" in response.text
    assert api.get(pid).get_json()["status"] == "pending"
    webhooks = client.get("/dashboard/webhooks")
    assert "Send test event" not in webhooks.text and "Save URL" not in webhooks.text
    assert client.get(f"/dashboard/processes/{pid}/refund").status_code == 403
    for path in ("/webhooks/test", "/webhooks/replay-failed", "/webhooks/url", f"/processes/{pid}/refund",
                 "/keys/roll", "/keys/roll-webhook-secret", f"/processes/{pid}/events/evt_x/resend",
                 f"/processes/{pid}/refunds/re_x/cancel", f"/processes/{pid}/refunds/re_x/transaction"):
        assert client.post("/dashboard" + path, data={"csrf_token": token}).status_code == 403, path


def test_another_merchants_process_is_the_console_404_page(console, make_shop):
    other = make_shop()
    pid = other.api.preorder().get_json()["processId"]
    for path in (f"/dashboard/processes/{pid}", "/dashboard/processes/not-an-id"):
        response = console.get(path)
        assert response.status_code == 404 and response.mimetype == "text/html"
        assert "<h1>Not found</h1>" in response.text
    cancel = console.post(f"/dashboard/processes/{pid}/cancel", data={"csrf_token": form_token(console)})
    assert cancel.status_code == 404
    assert other.api.get(pid).get_json()["status"] == "pending"
    assert listed(console.get(f"/dashboard/?q={pid}").text) == []


# --- Processes list, search, CSV -----------------------------------------------------------------------

def make_processes(api, clock, n, metadata=lambda i: {"orderRef": f"A-{i}"}):
    ids = []
    for i in range(n):
        ids.append(api.preorder({"amount": 10 + i, "metadata": metadata(i)}).get_json()["processId"])
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
    ids = make_processes(api, clock, 4, lambda i: {"orderRef": f"A-{i}", "email": f"Buyer{i % 2}@Example.com",
                                                     "items": [{"sku": "deep"}]})
    assert listed(console.get("/dashboard/?q=A-2").text) == [ids[2]]
    assert listed(console.get("/dashboard/?q=%20buyer1@example.COM%20").text) == [ids[3], ids[1]]
    assert listed(console.get("/dashboard/?q=deep").text) == []  # top-level values only
    assert listed(console.get(f"/dashboard/?q={ids[0].upper()}").text) == [ids[0]]
    customer_ref = "0f8fad5b-d9cb-469f-a165-70867728950e"  # a merchant's own UUID in its metadata
    tagged = api.preorder({"amount": 1, "metadata": {"cartId": customer_ref}}).get_json()["processId"]
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
    from app.dashboard import routes

    monkeypatch.setattr(routes, "CSV_BATCH", 7)  # several batches
    ids = make_processes(api, clock, 20, lambda i: {"orderRef": f"A-{i}", "note": 'say "hi", ok'})
    api.cancel(ids[3])
    clock.advance(1800)
    listed_by_api = api.list("?limit=100").get_json()["data"]
    rows = read_csv(console.get("/dashboard/processes.csv"))
    assert [r["processId"] for r in rows] == [p["processId"] for p in listed_by_api]
    for row, p in zip(rows, listed_by_api):
        assert row == {"processId": p["processId"], "status": p["status"], "amount": str(p["amount"]),
                       "livemode": "false", "createdAt": p["createdAt"], "updatedAt": p["updatedAt"],
                       "expiresAt": p["expiresAt"], "metadata": json.dumps(p["metadata"], separators=(",", ":")),
                       "assetId": "", "networkId": "", "amountDue": "", "amountPaid": ""}
    cancelled = read_csv(console.get("/dashboard/processes.csv?status=cancelled"))
    assert [r["processId"] for r in cancelled] == [ids[3]]
    assert 'href="/dashboard/processes.csv?status=cancelled"' in console.get("/dashboard/?status=cancelled").text


# --- One process -------------------------------------------------------------------------------------

@pytest.fixture
def shop_console(client, shop, make_user):
    """A client logged in as the owner of `shop` (whose webhooks reach `receiver`)."""
    make_user("staff@shop.example", shop.keys["merchantId"])
    assert log_in(client, "staff@shop.example").status_code == 303
    return client


def test_process_page_cancel_and_resend(shop_console, shop, worker, app):
    console = shop_console
    pid = shop.api.preorder({"amount": 19.99, "metadata": {"orderRef": "A-77"}}).get_json()["processId"]
    page = console.get(f"/dashboard/processes/{pid}")
    assert page.status_code == 200 and '<dd id="amount">19.99</dd>' in page.text
    assert "&#34;orderRef&#34;: &#34;A-77&#34;" in page.text and ">Cancel</button>" in page.text
    cancelled = console.post(f"/dashboard/processes/{pid}/cancel", data={"csrf_token": csrf_of(page.text)})
    assert cancelled.status_code == 200 and "The process is cancelled" in cancelled.text
    assert shop.api.get(pid).get_json()["status"] == "cancelled"
    assert ">Cancel</button>" not in cancelled.text
    again = console.post(f"/dashboard/processes/{pid}/cancel", data={"csrf_token": csrf_of(page.text)})
    assert again.status_code == 409 and "is cancelled; only a pending process can be cancelled" in again.text

    worker.run_once()
    conn = app.extensions["db"].connection()
    (event,) = event_rows.for_process(conn, pid)
    assert len(event_rows.attempts_of(conn, event.id)) == 1
    refresh = f'<meta http-equiv="refresh" content="2; url=/dashboard/processes/{pid}">'
    assert refresh not in console.get(f"/dashboard/processes/{pid}").text
    resent = console.post(f"/dashboard/processes/{pid}/events/{event.id}/resend",
                          data={"csrf_token": csrf_of(page.text)})
    assert resent.status_code == 200 and f"Event {event.id} is queued for delivery again" in resent.text
    # Queued, not sent from the web request: the page reloads itself until the attempt is made.
    assert len(event_rows.attempts_of(conn, event.id)) == 1 and refresh in resent.text
    assert refresh in console.get(f"/dashboard/processes/{pid}").text
    worker.run_once()
    assert len(event_rows.attempts_of(conn, event.id)) == 2
    shown = console.get(f"/dashboard/processes/{pid}").text
    assert shown.count("Delivery attempt of process.cancelled") == 2 and refresh not in shown
    assert console.post(f"/dashboard/processes/{pid}/events/evt_nope/resend",
                        data={"csrf_token": csrf_of(page.text)}).status_code == 404


# --- Webhooks ----------------------------------------------------------------------------------------

def test_webhooks_test_event_and_url(shop_console, shop, receiver, worker, clock):
    console = shop_console
    page = console.get("/dashboard/webhooks")
    assert receiver.url("/hooks/preorder") in page.text and "Every delivery is going through." in page.text
    assert "No test event sent yet." in page.text
    refresh = '<meta http-equiv="refresh" content="2; url=/dashboard/webhooks">'
    sent = console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})
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
    assert shown.count("HTTP 500") == 1 and "Every delivery is going through." in shown
    assert len(receiver.requests) == 2
    for url, reason in (("ftp://x", "scheme 'ftp' is not allowed"),
                        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 (link-local)"),
                        ("http://10.1.2.3:8080/", "10.1.2.3 (private)")):
        saved = console.post("/dashboard/webhooks/url", data={"csrf_token": csrf_of(page.text), "url": url})
        assert saved.status_code == 400
        assert f"The webhook URL is refused: {reason}" in html.unescape(saved.text)
    removed = console.post("/dashboard/webhooks/url", data={"csrf_token": csrf_of(page.text), "url": ""})
    assert "Webhook URL removed." in removed.text
    nothing = console.post("/dashboard/webhooks/test", data={"csrf_token": csrf_of(page.text)})
    assert nothing.status_code == 409 and "No webhook URL is set" in nothing.text


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0,5"}])  # two attempts
def test_failing_deliveries_are_listed_and_replayed_with_one_button(shop_console, shop, receiver, worker, clock):
    console = shop_console
    receiver.default = Reply(status=500)
    pids = [shop.api.preorder().get_json()["processId"] for _ in range(2)]
    for pid in pids:
        shop.api.cancel(pid)
    worker.run_once()
    page = console.get("/dashboard/webhooks")
    assert page.text.count(">retrying</span>") == 2 and "HTTP 500" in page.text
    clock.advance(5)
    worker.run_once()  # the last attempt of the schedule fails too
    page = console.get("/dashboard/webhooks")
    assert page.text.count(">failed</span>") == 2
    receiver.default = Reply(status=204)
    replayed = console.post("/dashboard/webhooks/replay-failed", data={"csrf_token": csrf_of(page.text)})
    assert "2 failed event(s) queued for delivery again." in replayed.text
    worker.run_once()
    assert "Every delivery is going through." in console.get("/dashboard/webhooks").text


# --- Keys ---------------------------------------------------------------------------------------------

def test_roll_the_secret_key_the_old_one_works_until_the_overlap_ends(console, merchant, api, clock):
    page = console.get("/dashboard/keys")
    assert page.status_code == 200 and merchant["secretKey"][:20] + "…" in page.text
    assert merchant["secretKey"] not in page.text  # never shown again
    rolled = console.post("/dashboard/keys/roll", data={"csrf_token": csrf_of(page.text)})
    assert rolled.status_code == 200 and rolled.headers["Cache-Control"] == "no-store"
    new_key = re.search(r'<code id="new-secret-value">(sk_test_\w+)</code>', rolled.text).group(1)
    assert "The previous keys keep working until 2026-11-19 11:06:40 UTC." in rolled.text
    assert "works until 2026-11-19 11:06:40 UTC" in rolled.text
    assert new_key not in console.get("/dashboard/keys").text  # the page that made it showed it once
    fresh = Api(api.client, new_key)
    assert fresh.list().status_code == 200 and api.list().status_code == 200
    clock.advance(24 * 3600 - 1)
    assert api.list().status_code == 200  # the last second of the overlap
    clock.advance(1)
    assert api.list().status_code == 401 and fresh.list().status_code == 200
    log_in(console, "owner@shop.example")  # 24 h later: the 12-hour session has ended
    assert "expired 2026-11-19 11:06:40 UTC" in console.get("/dashboard/keys").text


def test_roll_the_webhook_secret_signs_with_both_during_the_overlap(shop_console, shop, receiver, worker, clock):
    console = shop_console
    clock.now = int(time.time())  # standardwebhooks checks the timestamp against the real time
    log_in(console, "staff@shop.example")  # a week after the fixture's login: a new session
    page = console.get("/dashboard/keys")
    rolled = console.post("/dashboard/keys/roll-webhook-secret", data={"csrf_token": csrf_of(page.text)})
    new_secret = re.search(r'<code id="new-secret-value">(whsec_[\w+/=]+)</code>', rolled.text).group(1)
    until = datetime.fromtimestamp(clock.now + 24 * 3600, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
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
    assert page.status_code == 200 and "Roll secret key" not in page.text and "Roll webhook secret" not in page.text
    assert client.post("/dashboard/keys/roll", data={"csrf_token": csrf_of(page.text)}).status_code == 403
    assert client.post("/dashboard/keys/roll").status_code == 400  # no token: refused before the role
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
    assert console.post(path + "/transaction", data={"tx_hash": "0x" + "ab" * 32}).status_code == 400
    tx_hash = "0x" + "AB" * 32
    named = console.post(path + "/transaction", data={"csrf_token": token, "tx_hash": f" {tx_hash} "})
    assert named.status_code == 200
    assert (f"Transaction {tx_hash.lower()} is named for this refund: it completes once that"
            " transaction is confirmed.") in named.text
    assert f'<span class="mono" id="named-tx">{tx_hash.lower()}</span>' in named.text
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
    assert page.status_code == 200 and "No payout address and no wallet is registered yet" in page.text
    assert f"merchants set-payout {merchant['merchantId']} ADDRESS" in page.text
    result = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"], "0x" + "ab" * 20])
    assert result.exit_code == 0, result.output
    page = console.get("/dashboard/payouts")
    assert "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB" in page.text  # EIP-55 form
    assert 'class="panel network"' not in page.text  # no network has a forwarder factory
