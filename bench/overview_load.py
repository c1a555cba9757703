"""The overview under load through the shipped gunicorn, on SQLite and on PostgreSQL
(../shared/API.md "One caller never stalls the others"):
`python -m bench.overview_load [--processes N] [--days D] [--backend sqlite|postgresql]`.

bench/overview.py's live merchant (payout mode, USDC, a collection a day) with N processes
(1,300,000) created over the last D days (30): 25 % completed by a payment on chain, 33 % completed
without a payment (the contract's "a third completed by the sandbox": a live merchant has no
sandbox, so these are the rows a completion by hand writes, counted in the overview's completed
processes and in the sandbox sums it keeps but shows in test mode only), 3 % expired partly paid,
1 % refunded, the rest expired or cancelled. Loaded as bench/overview.py does, then its sums built
by `overview_rows.rebuild`; another merchant (test mode) with a secret key. Served by
`gunicorn -c gunicorn.conf.py` (wsgi:app, the shipped settings: 2 x cores + 1 sync workers, timeout
30 s), over HTTP on loopback, the owner logged in:
  (a) the owner loads /dashboard/overview 5 times untimed, then 20 times in a row: p50, p95, max;
  (b) the other merchant's preorders (POST /payment-button/process/preorder, bench/bodies.py's
      body) one after another for 5 s alone, the reference, then for 20 s while the owner runs five
      overview loops at once: every status of both (the overview may answer 429, never a 5xx) and
      the preorders' p50, p99 and max.
Targets: (a) p95 <= 1 s; (b) preorder p99 <= 1 s, every preorder 2xx, no overview 5xx. The server
log's alarms (worker timeouts, tracebacks) and the load average go with the figures to
bench/results/overview-load-<UTC timestamp>.json. Exit 1 when a target is missed.
"""
import argparse
import collections
import datetime
import json
import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from app.domain.merchants import create as create_merchant
from bench import bodies
from bench.console import OWNER, PASSWORD
from bench.overview import make_side, p
from bench.servers import Gunicorn

MONTH_MIX = (25, 3, 33)  # percent: completed with a payment, expired partly paid, completed without
OVERVIEW, PREORDER = "/dashboard/overview", "/payment-button/process/preorder"
LOOPS, LOOP_SECONDS, ALONE_SECONDS, WARM_UP, LOADS = 5, 20, 5, 5, 20


def login(base_url):
    """A requests session of the owner, logged in through the console's form."""
    session = requests.Session()
    page = session.get(base_url + "/dashboard/login", timeout=60)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    answer = session.post(base_url + "/dashboard/login", allow_redirects=False, timeout=60,
                          data={"email": OWNER, "password": PASSWORD, "csrf_token": token})
    assert answer.status_code == 303, answer.status_code
    return session


def calls(call, count=None, seconds=None):
    """[(seconds, status)] of `call()` made `count` times or for `seconds`, one after another; a
    failed connection is recorded by its exception's name."""
    found, end = [], time.monotonic() + (seconds or 0)
    while len(found) < count if count else time.monotonic() < end:
        started = time.perf_counter()
        try:
            status = call().status_code
        except requests.RequestException as e:
            status = type(e).__name__
        found.append((time.perf_counter() - started, status))
    return found


def summary(found):
    times = [t for t, _ in found]
    return {"requests": len(found), "p50_ms": p(times, 50) * 1000, "p95_ms": p(times, 95) * 1000,
            "p99_ms": p(times, 99) * 1000, "max_ms": max(times) * 1000,
            "statuses": dict(collections.Counter(str(s) for _, s in found))}


def measure(base_url, secret_key):
    """(a) and (b) above: {name: summary}."""
    viewer, preorders = login(base_url), requests.Session()
    body = bodies.compact(bodies.preorder_body()).encode()

    def overview(session=viewer):
        return session.get(base_url + OVERVIEW, timeout=60)

    def preorder():
        return preorders.post(base_url + PREORDER, data=body, timeout=60, headers={
            "Content-Type": "application/json", "x-secret-key": secret_key})

    calls(overview, WARM_UP)
    figures = {"overview": summary(calls(overview, LOADS)),
               "preorder alone": summary(calls(preorder, seconds=ALONE_SECONDS))}
    with ThreadPoolExecutor(LOOPS + 1) as pool:
        loops = []
        for _ in range(LOOPS):  # one viewer: its session's cookie in each loop's own connection
            session = requests.Session()
            session.cookies.update(viewer.cookies)
            loops.append(pool.submit(calls, lambda s=session: overview(s), seconds=LOOP_SECONDS))
        time.sleep(1)  # the loops under way before the first preorder
        during = pool.submit(calls, preorder, seconds=LOOP_SECONDS - 2)
        figures["overview x5"] = summary([c for loop in loops for c in loop.result()])
        figures["preorder during"] = summary(during.result())
    return figures


def run(folder, dialect, n, days, now):
    app, _, _ = make_side(folder, dialect, n, now, days, MONTH_MIX)
    with app.app_context():
        _, secret_key = create_merchant(app.extensions["db"], name="Other shop", livemode=False,
                                        webhook_url=None, now=now)
    app.extensions["db"].close_all()
    env = {"FLASK_DATABASE": str(app.config["DATABASE"])}
    log = Path(folder) / f"gunicorn-{dialect}.log"
    # gunicorn.conf.py as shipped
    with Gunicorn(f"overview-{dialect}", "wsgi:app", log, env) as server:
        figures = measure(server.base_url, secret_key)
        figures["workers"] = len(server.workers())
    figures["log_alarms"] = server.log_alarms()[:20]
    return figures


def misses(figures):
    """The targets this backend's figures miss, in words."""
    found = []
    if figures["overview"]["p95_ms"] > 1000:
        found.append(f"overview p95 {figures['overview']['p95_ms']:.0f} ms > 1 s")
    during = figures["preorder during"]
    if during["p99_ms"] > 1000:
        found.append(f"preorder p99 during the loops {during['p99_ms']:.0f} ms > 1 s")
    if set(during["statuses"]) - {"200", "201"}:
        found.append(f"preorders not 2xx: {during['statuses']}")
    for name in ("overview", "overview x5"):
        if any(not s.isdigit() or s >= "500" for s in figures[name]["statuses"]):
            found.append(f"{name}: a 5xx or no answer {figures[name]['statuses']}")
    if figures["log_alarms"]:
        found.append(f"{len(figures['log_alarms'])} alarms in the server's log")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.overview_load",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=1_300_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args(argv)
    now = int(time.time())
    result = {"processes": args.processes, "days": args.days, "mix_percent": MONTH_MIX,
              "load_average": {"before": os.getloadavg()}, "backends": {}}
    with tempfile.TemporaryDirectory(prefix="bench-overview-load-") as folder:
        for dialect in args.backend or ("sqlite", "postgresql"):
            started = os.getloadavg()
            figures = result["backends"][dialect] = run(folder, dialect, args.processes, args.days,
                                                        now)
            figures["load_average"] = {"before": started, "after": os.getloadavg()}
            figures["missed"] = misses(figures)
            print(f"\n{dialect}, {args.processes:,} processes in {args.days} days,"
                  f" {figures['workers']} workers; load average {started[0]:.1f} before,"
                  f" {os.getloadavg()[0]:.1f} after")
            print(f"{'':<16} {'requests':>8} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}  statuses")
            for name in ("overview", "preorder alone", "overview x5", "preorder during"):
                f = figures[name]
                print(f"{name:<16} {f['requests']:>8} " + " ".join(
                    f"{f[k]:>7.0f}ms" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms"))
                    + f"  {f['statuses']}")
            for line in figures["log_alarms"]:
                print(f"server log: {line}")
            print("targets: " + ("; ".join(figures["missed"]) or "met"), flush=True)
    result["load_average"]["after"] = os.getloadavg()
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (results / f"overview-load-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 1 if any(f["missed"] for f in result["backends"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
