"""The merchant console at a million processes:
`python -m bench.console [--processes N] [--requests N]`.

Two SQLite databases made by init-db, each with one merchant and its owner: a small one (1,000
processes) and a large one (1,000,000 by default), loaded through the data layer's bulk insert
(search rows included). Then, in this process, through the Flask test client logged in as the
owner (no network: the figures are the server's own time per request):
  - each page kind (first page, next page, a status filter, a search for a unique order reference,
    a search for an e-mail that 200 processes share on either side) is requested alternately on
    the two databases; p50/p95 per side and the ratio large / small (target p95 ratio <= 2);
  - the CSV export of every process, streamed: rows per second on each, and the peak of Python's
    allocations while streaming (tracemalloc, a second pass) on each: flat means about equal;
  - the same export of the large database through a real gunicorn (gunicorn.conf.py, one sync
    worker, its timeout cut to 5 s: the export must outlive it), read by an HTTP client: rows per
    second, the worker's peak RSS (VmHWM) before and after it, and the floor beside it: the same
    columns read by one plain SELECT and written by csv.writer in this process (no keyset batches,
    no effective status, no HTTP).
Prints a table and writes bench/results/console-<UTC timestamp>.json.
"""
import argparse
import datetime
import json
import random
import re
import statistics
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

from app import create_app
from app.config import DEFAULTS
from app.core.records import Process
from app.data import processes as process_rows
from app.db import init_db, open_database
from app.domain import accounts
from app.domain.merchants import create as create_merchant

OWNER, PASSWORD = "owner@bench.example", "bench password 1"
STATUSES = ("completed", "completed", "cancelled", "expired", "pending")
SHARED = 200  # processes per e-mail address, whatever the size: buyer<i % (n / 200)>@example.com


def _process(merchant_id, i, now, n):
    created = now + i * 5  # 5 s apart, the newest a little before the clock
    return Process(
        seq=None, id=str(uuid.uuid4()), merchant_id=merchant_id, status=STATUSES[i % len(STATUSES)],
        amount=f"{1 + i % 9_999}.{i % 100:02d}",
        metadata=json.dumps({"orderRef": f"A-{i}",
                             "email": f"buyer{i % max(1, n // SHARED)}@example.com"},
                            separators=(",", ":")),
        livemode=False, created_at=created, updated_at=created, expires_at=created + 1800)


def merchant_with_owner(app, now, *, livemode=False):
    """In `app`'s context: its database made, the bench's merchant and its console owner created;
    returns the merchant."""
    init_db()
    db = app.extensions["db"]
    merchant, _ = create_merchant(db, name="Bench shop", livemode=livemode, webhook_url=None,
                                  now=now)
    accounts.create_user(db, email=OWNER, merchant_id=merchant.id, role="owner", password=PASSWORD,
                         now=now, hash_method=app.config["DASHBOARD_PASSWORD_HASH"])
    return merchant


def logged_in(app):
    """A test client of `app` logged in as the owner."""
    client = app.test_client()
    login = client.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)
    answer = client.post("/dashboard/login", data={"email": OWNER, "password": PASSWORD,
                                                   "csrf_token": token})
    assert answer.status_code == 303, answer.status_code
    return client


def make_database(folder, n, now):
    """A database with `n` processes of one merchant and its owner: (app, logged-in client, n)."""
    path = str(Path(folder) / f"console-{n}.sqlite3")
    app = create_app({"DATABASE": path, "CLOCK": lambda: now})
    with app.app_context():
        merchant = merchant_with_owner(app, now)
    load = open_database(path, dict(DEFAULTS, SQLITE_SYNCHRONOUS="OFF"))
    started = time.perf_counter()
    with load.transaction() as conn:
        process_rows.insert_many(conn, (_process(merchant.id, i, now - n * 5, n) for i in range(n)))
    load.close_all()
    print(f"loaded {n:,} processes in {time.perf_counter() - started:.0f} s", flush=True)
    return app, logged_in(app), n


def page_urls(client, n, rng):
    first = client.get("/dashboard/").text
    next_url = re.search(r'href="([^"]+)" rel="next"', first).group(1).replace("&amp;", "&")
    return {
        "first page": "/dashboard/",
        "next page": next_url,
        "status=cancelled": "/dashboard/?status=cancelled",
        "search order ref": lambda: f"/dashboard/?q=A-{rng.randrange(n)}",
        "search shared e-mail":
            lambda: f"/dashboard/?q=buyer{rng.randrange(max(1, n // SHARED))}@example.com",
    }


def timed_get(client, url):
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, (url, response.status_code)
    return elapsed


def pages(sides, requests):
    """{kind: {side: [seconds...]}}, the sides alternating request by request."""
    rng = random.Random(7)
    urls = {name: page_urls(client, n, rng) for name, (_, client, n) in sides.items()}
    timings = {}
    for kind in urls[next(iter(urls))]:
        timings[kind] = {name: [] for name in sides}
        for _ in range(requests):
            for name, (_, client, _) in sides.items():
                url = urls[name][kind]
                timings[kind][name].append(timed_get(client, url() if callable(url) else url))
    return timings


def csv_export(client, trace=False):
    """(rows, seconds, peak traced bytes or None) of streaming the whole CSV export."""
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    response = client.get("/dashboard/processes.csv", buffered=False)
    rows = 0
    for chunk in response.response:
        rows += chunk.count("\r\n") if isinstance(chunk, str) else chunk.count(b"\r\n")
    elapsed = time.perf_counter() - started
    response.close()
    peak = None
    if trace:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return rows - 1, elapsed, peak


def export_floor(path):
    """(rows, seconds): the export's columns read by one SELECT and written by csv.writer to
    nowhere: what the rows cost without the service."""
    import csv
    import io
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    started = time.perf_counter()
    rows = 0
    for row in conn.execute("SELECT id, status, amount, livemode, created_at, updated_at,"
                            " expires_at, metadata FROM processes ORDER BY seq DESC"):
        writer.writerow(row)
        rows += 1
        if rows % 500 == 0:
            out.seek(0)
            out.truncate()
    elapsed = time.perf_counter() - started
    conn.close()
    return rows, elapsed


def export_through_gunicorn(folder, path):
    """(rows, seconds, worker peak RSS kB before, after) of the export through a real gunicorn."""
    import requests

    from bench.servers import Gunicorn

    env = {"FLASK_DATABASE": path, "GUNICORN_WORKERS": "1", "GUNICORN_TIMEOUT": "5",
           "GUNICORN_ACCESSLOG": ""}
    with Gunicorn("console", "wsgi:app", Path(folder) / "gunicorn.log", env=env) as server:
        session = requests.Session()
        login = session.get(server.base_url + "/dashboard/login", timeout=30)
        token = re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)
        answer = session.post(server.base_url + "/dashboard/login", allow_redirects=False,
                              timeout=30, data={"email": "owner@bench.example",
                                                "password": PASSWORD, "csrf_token": token})
        assert answer.status_code == 303, answer.status_code
        assert session.get(server.base_url + "/dashboard/", timeout=30).status_code == 200
        [before] = server.workers_peak_rss_kb()
        started = time.perf_counter()
        response = session.get(server.base_url + "/dashboard/processes.csv", stream=True,
                               timeout=60)
        rows = sum(chunk.count(b"\n") for chunk in response.iter_content(1 << 16))  # a row: one \n
        elapsed = time.perf_counter() - started
        [after] = server.workers_peak_rss_kb()
        alarms = server.log_alarms()
    assert not alarms, alarms
    return rows - 1, elapsed, before, after


def p(values, q):
    return (statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1
            else values[0])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.console",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=1_000_000,
                        help="the large database (default 1,000,000)")
    parser.add_argument("--small", type=int, default=1_000,
                        help="the small database (default 1,000)")
    parser.add_argument("--requests", type=int, default=200,
                        help="requests per page kind and side (default 200)")
    args = parser.parse_args(argv)
    now = int(time.time())
    with tempfile.TemporaryDirectory(prefix="bench-console-") as folder:
        sides = {"small": make_database(folder, args.small, now),
                 "large": make_database(folder, args.processes, now)}
        timings = pages(sides, args.requests)
        result = {"processes": {"small": args.small, "large": args.processes}, "pages": {},
                  "csv": {}}
        heads = ("small p50", "small p95", "large p50", "large p95", "p95 ratio")
        print(f"\n{'page':<22} " + " ".join(f"{h:>10}" for h in heads))
        for kind, by_side in timings.items():
            s50, s95 = p(by_side["small"], 50) * 1000, p(by_side["small"], 95) * 1000
            l50, l95 = p(by_side["large"], 50) * 1000, p(by_side["large"], 95) * 1000
            result["pages"][kind] = {"small_p50_ms": s50, "small_p95_ms": s95, "large_p50_ms": l50,
                                     "large_p95_ms": l95, "p95_ratio": l95 / s95}
            print(f"{kind:<22} {s50:>8.2f}ms {s95:>8.2f}ms {l50:>8.2f}ms {l95:>8.2f}ms"
                  f" {l95 / s95:>10.2f}")
        print(f"\n{'CSV export':<22} {'rows':>10} {'rows/s':>10} {'peak alloc':>12}")
        for name, (_, client, n) in sides.items():
            rows, seconds, _ = csv_export(client)
            assert rows == n, (rows, n)
            _, _, peak = csv_export(client, trace=True)
            result["csv"][name] = {"rows": rows, "rows_per_second": rows / seconds,
                                   "peak_traced_bytes": peak}
            print(f"{name:<22} {rows:>10,} {rows / seconds:>10,.0f} {peak / 1e6:>10.2f}MB")
        for _, (app, _, _) in sides.items():
            app.extensions["db"].close_all()
        large = sides["large"][0].config["DATABASE"]
        rows, seconds, before, after = export_through_gunicorn(folder, large)
        assert rows == args.processes, (rows, args.processes)
        floor_rows, floor_seconds = export_floor(large)
        result["csv"]["gunicorn"] = {
            "rows": rows, "rows_per_second": rows / seconds, "worker_peak_rss_kb_before": before,
            "worker_peak_rss_kb_after": after, "floor_rows_per_second": floor_rows / floor_seconds,
            "ratio_to_floor": (rows / seconds) / (floor_rows / floor_seconds)}
        print(f"\nCSV export through gunicorn (1 sync worker, timeout 5 s): {rows:,} rows,"
              f" {rows / seconds:,.0f} rows/s ({seconds:.0f} s); floor (SELECT + csv.writer)"
              f" {floor_rows / floor_seconds:,.0f} rows/s,"
              f" ratio {(rows / seconds) / (floor_rows / floor_seconds):.2f};"
              f" worker peak RSS {before / 1024:.1f} MB before, {after / 1024:.1f} MB after")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (results / f"console-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    worst = max(v["p95_ratio"] for v in result["pages"].values())
    print(f"\nworst p95 ratio {worst:.2f} (target <= 2)")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
