"""Limits that only the real server shows: gunicorn's header-field limit (16 KiB), and hostile
bodies that must not cost the worker process its life (API.md, README Resource limits)."""
import requests

from servers import create_merchant, flask, gunicorn, service_env

PREORDER = "/payment-button/process/preorder"


def test_header_limit_and_hostile_bodies_under_gunicorn(tmp_path):
    database = tmp_path / "limits.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    log_path = tmp_path / "gunicorn.log"

    with gunicorn(env, log_path, workers=1) as base:
        def post(body, secret_key=key):
            return requests.post(base + PREORDER, data=body, timeout=30, headers={
                "x-secret-key": secret_key, "Content-Type": "application/json"})

        # A 10 KB key is within gunicorn's 16 KiB field limit: the service answers it, in JSON.
        response = post(b'{"amount": 5}', secret_key="x" * 10_000)
        assert (response.status_code, response.json()["code"]) == (401, "invalid_secret_key")
        # Past 16 KiB gunicorn refuses the request itself (431 Request Header Fields Too Large),
        # before the application sees it, so the answer is gunicorn's plain text.
        response = post(b'{"amount": 5}', secret_key="x" * 17_000)
        assert response.status_code == 431
        assert "application/json" not in response.headers.get("Content-Type", "")

        # Nesting the parser meets (within 64 KiB), then one over the size limit; the one worker
        # survives both and serves the next request.
        response = post(b'{"amount": 5, "metadata": ' + b"[" * 60_000)
        assert (response.status_code, response.json()["code"]) == (400, "invalid_json")
        response = post(b"[" * 100_000 + b"]" * 100_000)
        assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
        assert post(b'{"amount": 5}').status_code == 200

        # A chunked body (no Content-Length) is held to the same 64 KiB: up to it accepted, one
        # byte more refused, never silently cut and parsed.
        def chunked(size):
            body = b'{"amount": 5}' + b" " * (size - len(b'{"amount": 5}'))
            return requests.post(base + PREORDER, data=iter([body[i:i + 4096] for i in range(0, size, 4096)]),
                                 timeout=30, headers={"x-secret-key": key, "Content-Type": "application/json"})
        response = chunked(65_536)
        assert response.request.headers.get("Transfer-Encoding") == "chunked"
        assert response.status_code == 200
        response = chunked(65_537)
        assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
        assert post(b'{"amount": 5}').status_code == 200

    log = log_path.read_text()
    assert "Traceback" not in log and "RecursionError" not in log
    assert log.count("Booting worker") == 1  # the one worker was never replaced
