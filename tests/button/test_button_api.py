"""The Button API (x-public-key, CORS open): public process view and sandbox payments."""
import hashlib
import json
import re
import threading
from pathlib import Path

import pytest
from support.helpers import Api, assert_error, events_of
from werkzeug.http import http_date

SECRET_MARK = "very-private@example.com"


class Button:
    """The calls the payment button makes from a browser."""

    def __init__(self, client, public_key, origin="https://shop.example"):
        self.client, self.public_key, self.origin = client, public_key, origin

    def headers(self, key=None):
        headers = {"Origin": self.origin}
        key = self.public_key if key is None else key
        if key:
            headers["x-public-key"] = key
        return headers

    def public(self, process_id, key=None):
        return self.client.get(f"/payment-button/process/{process_id}/public",
                               headers=self.headers(key))

    def pay(self, process_id, outcome="success", key=None, body=None,
            content_type="application/json"):
        data = json.dumps({"outcome": outcome}) if body is None else body
        return self.client.post(
            f"/payment-button/process/{process_id}/sandbox/pay",
            data=data, content_type=content_type, headers=self.headers(key),
        )


@pytest.fixture
def button(client, merchant):
    return Button(client, merchant["publicKey"])


@pytest.fixture
def process(api):
    response = api.preorder({"amount": 19.90,
                             "metadata": {"email": SECRET_MARK, "orderRef": "A-1"}})
    return response.get_json()


def assert_cors(response):
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "x-public-key" in response.headers["Access-Control-Allow-Headers"]
    assert response.headers["Access-Control-Expose-Headers"] == "Date"


def test_public_process_shows_no_metadata(button, process):
    response = button.public(process["processId"])
    assert response.status_code == 200
    body = response.get_json()
    assert body == {
        "processId": process["processId"],
        "status": "pending",
        "amount": 19.9,
        "currency": "USD",
        "expiresAt": process["expiresAt"],
        "livemode": False,
        "networkState": None,
        "payment": None,
    }
    assert list(body) == ["processId", "status", "amount", "currency", "expiresAt", "livemode",
                          "networkState", "payment"]
    assert SECRET_MARK not in response.get_data(as_text=True)
    assert_cors(response)


def test_public_amount_keeps_its_digits(api, button):
    created = api.preorder_raw(b'{"amount": 19.90}').get_json()
    assert '"amount":19.90,' in button.public(created["processId"]).get_data(as_text=True)


def test_preflight_is_answered(client, process):
    response = client.options(
        f"/payment-button/process/{process['processId']}/sandbox/pay",
        headers={"Origin": "https://shop.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, x-public-key"},
    )
    assert response.status_code == 200
    assert_cors(response)
    assert "POST" in response.headers["Access-Control-Allow-Methods"]


def test_secret_key_endpoints_send_no_cors_headers(api, process):
    response = api.get(process["processId"])
    assert response.status_code == 200
    assert not [h for h in response.headers.keys() if h.lower().startswith("access-control-")]


@pytest.mark.parametrize(
    "key,status,code",
    [
        ("", 401, "missing_public_key"),
        ("pk_test_" + "x" * 40, 401, "invalid_public_key"),
        ("nonsense", 401, "invalid_public_key"),
    ],
)
def test_public_key_errors(button, process, key, status, code):
    for response in (button.public(process["processId"], key=key),
                     button.pay(process["processId"], key=key)):
        assert_error(response, status, code)
        assert_cors(response)


def test_secret_key_in_public_header_is_called_out(button, process, merchant):
    error = assert_error(button.public(process["processId"], key=merchant["secretKey"]), 401,
                         "invalid_public_key")
    assert "secret key" in error["message"]
    assert merchant["secretKey"] not in error["message"]


def test_another_merchants_public_key_is_404(client, make_merchant, button, process):
    other = Button(client, make_merchant(name="Other")["publicKey"])
    assert_error(other.public(process["processId"]), 404, "not_found")
    assert_error(other.pay(process["processId"]), 404, "not_found")
    assert button.public(process["processId"]).get_json()["status"] == "pending"


@pytest.mark.parametrize("process_id", ["nope", "00000000-0000-4000-8000-000000000000", "%00"])
def test_unknown_process_is_404(button, process_id):
    assert_error(button.public(process_id), 404, "not_found")
    assert_error(button.pay(process_id), 404, "not_found")


def test_disabled_merchant(button, process, runner, merchant):
    runner.invoke(args=["merchants", "disable", merchant["merchantId"]])
    assert_error(button.public(process["processId"]), 403, "merchant_disabled")


def test_sandbox_success_completes_and_writes_payment_completed(button, api, process, runner,
                                                                clock):
    clock.advance(30)
    response = button.pay(process["processId"], "success")
    assert response.status_code == 200
    assert response.get_json()["status"] == "completed"
    assert SECRET_MARK not in response.get_data(as_text=True)
    assert_cors(response)
    full = api.get(process["processId"]).get_json()
    assert full["status"] == "completed" and full["updatedAt"] == "2026-11-18T11:07:10Z"
    assert events_of(runner, process["processId"]) == ["payment.completed"]
    assert_error(button.pay(process["processId"], "success"), 409, "invalid_state")
    assert_error(button.pay(process["processId"], "failure"), 409, "invalid_state")
    assert events_of(runner, process["processId"]) == ["payment.completed"]


def test_sandbox_failure_leaves_the_process_pending(button, process, runner):
    response = button.pay(process["processId"], "failure")
    assert response.status_code == 200
    assert response.get_json()["status"] == "pending"
    assert button.pay(process["processId"], "failure").status_code == 200
    assert button.pay(process["processId"], "success").get_json()["status"] == "completed"
    assert events_of(runner, process["processId"]) == ["payment.failed", "payment.failed",
                                                       "payment.completed"]


def test_sandbox_is_refused_for_live_merchants(client, make_merchant, runner):
    live = make_merchant(name="Live", live=True)
    created = Api(client, live["secretKey"]).preorder().get_json()
    button = Button(client, live["publicKey"])
    assert button.public(created["processId"]).get_json()["livemode"] is True
    for outcome in ("success", "failure"):
        assert_error(button.pay(created["processId"], outcome), 403, "sandbox_only")
    assert events_of(runner, created["processId"]) == []


@pytest.mark.parametrize(
    "body,content_type,status,code",
    [
        ('{"outcome": "maybe"}', "application/json", 400, "validation_error"),
        ("{}", "application/json", 400, "validation_error"),
        ('{"outcome": "success", "amount": 1}', "application/json", 400, "validation_error"),
        ('{"outcome": null}', "application/json", 400, "validation_error"),
        ('["success"]', "application/json", 400, "validation_error"),
        ("{outcome", "application/json", 400, "invalid_json"),
        ('{"outcome": "success"}', "text/plain", 415, "unsupported_media_type"),
    ],
)
def test_sandbox_pay_body(button, process, runner, body, content_type, status, code):
    assert_error(button.pay(process["processId"], body=body, content_type=content_type),
                 status, code)
    assert events_of(runner, process["processId"]) == []


@pytest.mark.parametrize("final", ["cancelled", "expired"])
def test_sandbox_on_a_final_process_is_invalid_state(button, api, process, clock, final):
    if final == "cancelled":
        api.cancel(process["processId"])
    else:
        clock.advance(1800)
    assert button.public(process["processId"]).get_json()["status"] == final
    for outcome in ("success", "failure"):
        error = assert_error(button.pay(process["processId"], outcome), 409, "invalid_state")
        assert final in error["message"]


def test_completion_and_cancellation_race_one_winner(app, merchant, runner):
    api = Api(app.test_client(), merchant["secretKey"])
    for _ in range(3):
        process_id = api.preorder().get_json()["processId"]
        barrier = threading.Barrier(16)
        results = []

        def act(i, process_id, barrier, results):
            client = app.test_client()
            barrier.wait()
            if i % 2:
                response = Button(client, merchant["publicKey"]).pay(process_id, "success")
                results.append(("completed", response.status_code))
            else:
                response = Api(client, merchant["secretKey"]).cancel(process_id)
                results.append(("cancelled", response.status_code))

        threads = [threading.Thread(target=act, args=(i, process_id, barrier, results))
                   for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [outcome for outcome, status in results if status == 200]
        assert len(winners) == 1
        assert sorted(status for _, status in results) == [200] + [409] * 15
        assert api.get(process_id).get_json()["status"] == winners[0]
        expected = {"completed": "payment.completed", "cancelled": "process.cancelled"}[winners[0]]
        assert events_of(runner, process_id) == [expected]


@pytest.mark.parametrize("path", ["/process/{pid}/public", "/process/{pid}/qr.svg",
                                  "/process/{pid}/sandbox/pay", "/button.js"])
def test_cors_headers_also_on_the_routers_405(client, process, path):
    response = client.put("/payment-button" + path.format(pid=process["processId"]),
                          headers={"Origin": "https://shop.example"})
    assert_error(response, 405, "method_not_allowed")
    assert_cors(response)


APP_STATIC = Path(__file__).resolve().parent.parent.parent / "app" / "static"


def test_button_js_is_the_component_as_written(client):
    """One self-contained <script> for merchants (its QR codes come from GET …/qr.svg)."""
    response = client.get("/payment-button/button.js", headers={"Origin": "https://shop.example"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert response.headers["Cache-Control"] == "public, max-age=300"
    assert response.headers["Content-Disposition"] == "inline; filename=button.js"
    assert response.data == (APP_STATIC / "button.js").read_bytes()
    assert response.headers["Content-Length"] == str(len(response.data))
    assert response.headers["ETag"] == f'"{hashlib.sha256(response.data).hexdigest()[:32]}"'
    assert response.headers["Last-Modified"] == http_date(
        int((APP_STATIC / "button.js").stat().st_mtime))
    assert_cors(response)


def test_button_js_answers_a_revalidation_with_304(client):
    etag = client.get("/payment-button/button.js").headers["ETag"]
    response = client.get("/payment-button/button.js", headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag
    assert response.headers["Cache-Control"] == "public, max-age=300"
    assert client.get("/payment-button/button.js",
                      headers={"If-None-Match": '"other"'}).status_code == 200


BUTTON_FOLDER = APP_STATIC / "button"


def test_button_js_imports_the_modules_beside_it(client):
    # The one classic script merchants include; the component is the modules it imports.
    script = client.get("/payment-button/button.js").get_data(as_text=True)
    assert "import(new URL('button/element.js', src).href)" in script
    assert len(script.splitlines()) < 40


@pytest.mark.parametrize("name, kind", [
    *[(path.name, "text/javascript") for path in sorted(BUTTON_FOLDER.glob("*.js"))],
    ("button.css", "text/css"),
])
def test_the_buttons_modules_and_style_sheet_are_served_as_button_js_is(client, name, kind):
    response = client.get(f"/payment-button/button/{name}",
                          headers={"Origin": "https://shop.example"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == f"{kind}; charset=utf-8"
    assert response.data == (BUTTON_FOLDER / name).read_bytes()
    assert response.headers["Cache-Control"] == "no-cache"  # revalidated: never old beside new
    assert response.headers["ETag"] == f'"{hashlib.sha256(response.data).hexdigest()[:32]}"'
    modified = int((BUTTON_FOLDER / name).stat().st_mtime)
    assert response.headers["Last-Modified"] == http_date(modified)
    assert_cors(response)  # module scripts are fetched in CORS mode
    revalidated = client.get(f"/payment-button/button/{name}",
                             headers={"If-None-Match": response.headers["ETag"]})
    assert revalidated.status_code == 304 and revalidated.data == b""


def test_every_module_says_what_it_is_for_and_imports_only_its_neighbours(client):
    modules = sorted(BUTTON_FOLDER.glob("*.js"))
    assert {"element.js", "api.js", "wallets.js", "format.js"} <= {m.name for m in modules}
    for module in modules:
        text = module.read_text()
        assert text.startswith(("//", "/*")), module.name
        for target in re.findall(r"^import .* from '([^']+)';$", text, re.M | re.S):
            assert target.startswith("./"), (module.name, target)
            assert (BUTTON_FOLDER / target[2:]).is_file(), (module.name, target)


@pytest.mark.parametrize("path", [
    "/payment-button/button/" + rest for rest in [
        "nothing.js", "button.js", "..", "%2e%2e", "../button.js", "%2e%2e%2fbutton.js",
        "..%2f..%2fweb%2fbutton.py", "", "sub/element.js", "element.js%00"]
] + ["/payment-button/button"])
def test_nothing_but_the_buttons_files_is_served_from_its_folder(client, path):
    response = client.get(path, headers={"Origin": "https://shop.example"})
    if response.status_code == 200:  # a client may resolve "..": then it is button.js itself
        assert response.data == (APP_STATIC / "button.js").read_bytes(), path
        return
    assert_error(response, 404, "not_found")


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_buttons_files_take_only_get(client, method):
    response = getattr(client, method)("/payment-button/button/element.js",
                                        headers={"Origin": "https://shop.example"})
    assert_error(response, 405, "method_not_allowed")
    assert_cors(response)


def test_the_app_serves_no_static_folder_of_its_own(client):
    # button.js is served at its documented path only; the console's files under /dashboard/static.
    for path in ("/static/button.js", "/static/console/console.js"):
        assert_error(client.get(path), 404, "not_found", "No such resource.")
