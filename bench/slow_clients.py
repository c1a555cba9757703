"""Slow clients against each server layout: N connections sending their headers at 1 byte/s while
one normal client sends a preorder every 0.5 s; prints the normal preorders' latencies per layout.

    .venv/bin/python -m bench.slow_clients [--slow 5 50] [--seconds 40] [--layouts sync nginx ...]

Layouts: `sync` (gunicorn.conf.py as shipped, 5 sync workers on 2 cores), `gthread-N` (the same
workers with N threads each), `nginx` (deploy/nginx.conf in front of the sync workers, over TLS).
Needs Debian's nginx for `nginx`. Loopback only; every connection ends with the run.
"""
import argparse
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
import trustme

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.nginx import nginx
from support.servers import create_merchant, flask, free_port, gunicorn, service_env

PREORDER = "/payment-button/process/preorder"


def slow_client(port, stop, tls=None):
    """Headers at 1 byte/s until `stop` (never a complete request)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname="pay.example.com")
        sock.sendall(f"POST {PREORDER} HTTP/1.1\r\nHost: pay.example.com\r\nX-Slow: ".encode())
        while not stop.wait(1):
            sock.sendall(b"a")
    except OSError:
        pass  # closed by the server: counted by the server's log, not here
    finally:
        try:
            sock.close()
        except (OSError, UnboundLocalError):
            pass


def measure(base, key, seconds, verify):
    """Preorders every 0.5 s for `seconds`: (latencies of the 200s, other outcomes)."""
    latencies, failures = [], []
    session = requests.Session()
    session.trust_env = False
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            response = session.post(base + PREORDER, json={"amount": 5}, verify=verify, timeout=40,
                                    headers={"x-secret-key": key, "Connection": "close"})
            if response.status_code == 200:
                latencies.append(time.monotonic() - started)
            else:
                failures.append(response.status_code)
        except requests.RequestException as e:
            failures.append(type(e).__name__)
        time.sleep(max(0, 0.5 - (time.monotonic() - started)))
    return latencies, failures


def run(layout, slow, seconds, workdir):
    workdir = Path(workdir)
    env = service_env(workdir / "db.sqlite3")
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    if layout.startswith("gthread-"):
        env.update(GUNICORN_WORKER_CLASS="gthread", GUNICORN_THREADS=layout.split("-")[1])
    with gunicorn(env, workdir / "gunicorn.log", workers=5) as base:
        with _front(layout, base, workdir) as (base, port, tls, verify):
            stop = threading.Event()
            threads = [threading.Thread(target=slow_client, args=(port, stop, tls), daemon=True)
                       for _ in range(slow)]
            for t in threads:
                t.start()
            time.sleep(1)
            latencies, failures = measure(base, key, seconds, verify)
            stop.set()
            for t in threads:
                t.join(timeout=5)
    timeouts = (workdir / "gunicorn.log").read_text().count("WORKER TIMEOUT")
    return latencies, failures, timeouts


class _front:
    """Nothing in front (the gunicorn port), or nginx with a fresh CA and certificate."""

    def __init__(self, layout, base, workdir):
        self.layout, self.base, self.workdir = layout, base, Path(workdir)

    def __enter__(self):
        port = int(self.base.rsplit(":", 1)[1])
        if self.layout != "nginx":
            return self.base, port, None, True
        ca = trustme.CA()
        cert = ca.issue_cert("pay.example.com", "127.0.0.1")
        cert.private_key_pem.write_to_path(self.workdir / "key.pem")
        cert.cert_chain_pems[0].write_to_path(self.workdir / "cert.pem")
        ca.cert_pem.write_to_path(self.workdir / "ca.pem")
        https, http = free_port(), free_port()
        self._nginx = nginx(self.workdir / "nginx", upstream=f"127.0.0.1:{port}", https_port=https,
                            http_port=http, cert=self.workdir / "cert.pem",
                            key=self.workdir / "key.pem")
        self._nginx.__enter__()
        tls = ssl.create_default_context(cafile=str(self.workdir / "ca.pem"))
        return f"https://127.0.0.1:{https}", https, tls, str(self.workdir / "ca.pem")

    def __exit__(self, *exc):
        if self.layout == "nginx":
            self._nginx.__exit__(*exc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--layouts", nargs="+",
                        default=["sync", "gthread-4", "gthread-16", "nginx"])
    args = parser.parse_args()
    print(f"{'layout':<12} {'slow':>4} {'ok':>4} {'failed':>6} {'median s':>9} {'max s':>7}"
          "  worker timeouts")
    for layout in args.layouts:
        for slow in args.slow:
            with tempfile.TemporaryDirectory() as workdir:
                latencies, failures, timeouts = run(layout, slow, args.seconds, workdir)
            median = statistics.median(latencies) if latencies else float("nan")
            worst = max(latencies) if latencies else float("nan")
            print(f"{layout:<12} {slow:>4} {len(latencies):>4} {len(failures):>6} {median:>9.3f}"
                  f" {worst:>7.3f}  {timeouts}  {sorted(set(map(str, failures)))}", flush=True)


if __name__ == "__main__":
    main()
