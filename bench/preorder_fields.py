"""What a preorder's optional fields cost, timed in one process (`python -m bench.preorder_fields`).

The WSGI call of `POST /payment-button/process/preorder` through Flask's test client on a durable
SQLite file (no gunicorn, no network): the realistic body (amount and two metadata values) against
the same body with each optional field of the contract added, and with all of them. Rounds
alternate the bodies, the order turning each round; CPU per request is this process's
(`time.process_time`: Python, SQLite and the commit's sync call), so other work on the machine
hardly moves it. Prints each body's median µs per request and its difference from the plain one.
"""
import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from app import create_app

PLAIN = {"amount": 19.99, "metadata": {"orderRef": "A-1042", "email": "buyer@example.com"}}
FIELDS = {
    "currency": {"currency": "USD"},
    "description": {"description": "Two ceramic mugs, blue glaze"},
    "urls": {"successUrl": "https://shop.example/thanks?order=A-1042",
             "cancelUrl": "https://shop.example/cart"},
}
BODIES = {"plain": PLAIN, **{name: dict(PLAIN, **extra) for name, extra in FIELDS.items()},
          "all": dict(PLAIN, **{k: v for extra in FIELDS.values() for k, v in extra.items()})}


def _client(workdir):
    app = create_app({"DATABASE": str(Path(workdir) / "fields.sqlite3")})
    runner = app.test_cli_runner()
    assert runner.invoke(args=["init-db"]).exit_code == 0
    made = runner.invoke(args=["merchants", "create", "--name", "bench", "--json"])
    key = json.loads(made.output)["secretKey"]
    return app.test_client(), {"x-secret-key": key}


def _round(client, headers, body, requests):
    started = time.process_time()
    for _ in range(requests):
        answer = client.post("/payment-button/process/preorder", data=body, headers=headers,
                             content_type="application/json")
        assert answer.status_code == 200, answer.get_data(as_text=True)
    return (time.process_time() - started) / requests * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--requests", type=int, default=300)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        client, headers = _client(workdir)
        encoded = {name: json.dumps(body) for name, body in BODIES.items()}
        _round(client, headers, encoded["plain"], opts.requests)  # warm-up
        times = {name: [] for name in encoded}
        for i in range(opts.rounds):
            for name in (list(encoded) if i % 2 == 0 else reversed(list(encoded))):
                times[name].append(_round(client, headers, encoded[name], opts.requests))
    plain = statistics.median(times["plain"])
    print(f"{'body':<12} {'µs/request':>10} {'over plain':>10}")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:<12} {median:>10.0f} {median - plain:>+10.0f}")


if __name__ == "__main__":
    main()
