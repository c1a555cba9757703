"""Payment latency as the payer sees it (`python -m bench.latency`; a Hardhat node, about a minute).

The service as deployed: gunicorn serving the app, `watch-payments --poll-interval P` and
`deliver-webhooks --poll-max 0.2` looping beside it, a webhook receiver on loopback, SQLite. Then
`--payments` times (20): a transfer to a pending process's deposit address, a pause at a random
point of the poll cycle, and the block that gives it its depth (or, with `--finality finalized`,
the proxy of tests/support/fake_rpc.py moving its `finalized` block to the transfer's): t0, when
that block exists. Measured from t0:
- paid: the public process endpoint (`GET /payment-button/process/<id>/public`, what the payment
  button polls) first answers `completed`, asked every 10 ms. The button itself asks every 1 s at
  first, then less often (app/static/button/element.js): add its own wait to this figure;
- webhook: the receiver gets `payment.completed` (it left the delivery worker).
Target: the median and the max of each ≤ P + 0.5 s (P = 1 s).
"""
import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from bench import seed, service, stats
from bench.servers import ROOT, Gunicorn, free_port
from bench.watcher import Node, _addresses, _latency_proxy

CONFIRMATIONS = 3


class Receiver:
    """The merchant's webhook endpoint: when each process's payment.completed arrived."""

    def __init__(self):
        self.arrived = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                at = time.perf_counter()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body["type"] == "payment.completed":
                    receiver.arrived.setdefault(body["data"]["processId"], at)
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def close(self):
        self.server.shutdown()


def run(opts, workdir):
    node = Node(workdir / "hardhat.log")
    receiver, proxy, procs, web = Receiver(), None, [], None
    try:
        url = node.url
        if opts.finality != "confirmations":
            proxy = _latency_proxy(node.url, 0)
            proxy.tag(opts.finality, node.head())
            url = proxy.url
        db = workdir / "latency.sqlite3"
        service.init_db(db)
        merchant = service.create_merchant(db, webhook_url=receiver.url)
        addresses = _addresses(opts.payments, 5)
        ids = seed.seed_payments(db, merchant["merchantId"], url, node.token, node.head() + 1,
                                 addresses, CONFIRMATIONS)
        if opts.finality != "confirmations":
            service.flask(db, "networks", "set-finality", "bench", opts.finality)
        web = Gunicorn("web", service.SERVICE_APP, workdir / "web.log",
                       env={"FLASK_DATABASE": str(db)}).start()
        env = service.flask_env(db)
        for args in (("watch-payments", "--poll-interval", str(opts.poll_interval)),
                     ("deliver-webhooks", "--poll-max", "0.2")):
            log = open(workdir / f"{args[0]}.log", "w")
            procs.append(subprocess.Popen(service.flask_command(*args), cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        session = requests.Session()
        rng = random.Random(opts.seed)
        paid, hooked = [], []
        for process_id, address in zip(ids, addresses, strict=True):
            node.transfer(address, 10**6)
            time.sleep(rng.random() * opts.poll_interval)  # anywhere in the poll cycle
            if proxy is None:
                node.mine(CONFIRMATIONS - 1)
            else:
                node.mine(1)
                proxy.tag(opts.finality, node.head() - 1)  # the transfer's block
            t0 = time.perf_counter()
            public = f"{web.base_url}/payment-button/process/{process_id}/public"
            while session.get(public, headers={"x-public-key": merchant["publicKey"]},
                              timeout=10).json()["status"] != "completed":
                if time.perf_counter() - t0 > 20 * opts.poll_interval:
                    raise RuntimeError(f"{process_id} not completed"
                                       f" after {20 * opts.poll_interval} s")
                time.sleep(0.01)
            paid.append(time.perf_counter() - t0)
            while process_id not in receiver.arrived:
                if time.perf_counter() - t0 > 30:
                    raise RuntimeError(f"no webhook for {process_id}")
                time.sleep(0.005)
            hooked.append(receiver.arrived[process_id] - t0)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        if web is not None:
            web.stop()
        receiver.close()
        if proxy is not None:
            proxy.close()
        node.close()
    limit = opts.poll_interval + 0.5
    figures = {name: {"median_s": round(statistics.median(v), 3), "max_s": round(max(v), 3),
                      "min_s": round(min(v), 3), "all_s": [round(x, 3) for x in v]}
               for name, v in (("paid", paid), ("webhook", hooked))}
    targets = [stats.target(f"{name} {kind} / (P + 0.5 s)", figures[name][f"{kind}_s"] / limit,
                            at_most=1.0)
               for name in ("paid", "webhook") for kind in ("median", "max")]
    return {"scenario": "latency", "poll_interval_s": opts.poll_interval, "finality": opts.finality,
            "payments": opts.payments, **figures, "targets": targets}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payments", type=int, default=20)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--finality", choices=("confirmations", "safe", "finalized"),
                        default="confirmations")
    parser.add_argument("--seed", type=int, default=1)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as workdir:
        result = run(opts, Path(workdir))
    print(json.dumps(result, indent=2))
    sys.exit(0 if all(t["met"] for t in result["targets"]) else 1)


if __name__ == "__main__":
    main()
