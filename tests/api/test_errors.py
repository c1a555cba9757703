"""Every non-2xx response is the JSON error envelope (docs/contract.md, Errors)."""
import pytest
from support import dbutil
from support.helpers import assert_error


def test_unknown_path_is_json_404(client):
    assert_error(client.get("/no/such/path"), 404, "not_found")


def test_database_failure_is_a_bare_json_500(app, api):
    # A real fault: the processes table disappears under the running service.
    dbutil.drop_tables(app.config["DATABASE"], "idempotency_keys", "events", "processes")
    response = api.preorder()
    assert_error(response, 500, "internal_error")
    text = response.get_data(as_text=True)
    assert "processes" not in text and "sqlite" not in text.lower() and "Traceback" not in text
    assert api.secret_key not in text


@pytest.mark.parametrize("app_config", [{"DEMO_SHOP": True}])
@pytest.mark.parametrize("method, path", [
    ("POST", "/payment-button//process/preorder"),
    ("GET", "/payment-button//processes"),
    ("GET", "/payment-button/process/00000000-0000-4000-8000-000000000000//public"),
    ("GET", "/payment-button//button.js"),
    ("GET", "/demo//webhooks"),
])
def test_a_doubled_slash_is_a_json_404_not_a_redirect(client, method, path):
    response = client.open(path, method=method, headers={"x-secret-key": "sk_test_x"})
    assert_error(response, 404, "not_found", "No such resource.")
    assert "Location" not in response.headers


def test_options_advertises_only_the_methods_that_answer(client):
    response = client.options("/payment-button/process/preorder")
    assert response.status_code == 200
    assert sorted(response.headers["Allow"].split(", ")) == ["OPTIONS", "POST"]


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.get_json() == {
        "status": "ok", "outbox": {"pending": 0, "due": 0, "oldestDueAgeSeconds": 0},
        "networks": {}}


def test_healthz_when_the_database_does_not_answer(tmp_path, clock):
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "missing" / "x.sqlite3"),
                      "CLOCK": clock})
    (tmp_path / "missing").write_text("a file where the directory should be")
    assert_error(app.test_client().get("/healthz"), 503, "unavailable")


def test_healthz_on_a_database_without_the_schema(tmp_path, clock):
    # A mistyped FLASK_DATABASE opens an empty file: the service cannot work, so it is not healthy.
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "typo.sqlite3"), "CLOCK": clock})
    assert_error(app.test_client().get("/healthz"), 503, "unavailable")
    app.extensions["db"].close_all()
