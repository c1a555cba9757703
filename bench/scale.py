"""What a request, a scrape and a poll cost as the database grows, on PostgreSQL:
`python -m bench.scale [--processes N] [--small N] [--rounds R] [--seconds S] [--binary-floor]`.

Two databases on one durable PostgreSQL server (bench/postgres.py), the same settings, built the
same way at two sizes: `--small` (10,000) and `--processes` (1,000,000; 10 million is the issue's
size: see bench/README.md for what it takes). Each is made by init-db's schema and loaded by
INSERT … SELECT (generate_series), a year of history:
- the bulk: bench/overview.py's live merchant in the payout mode (`make_side`: processes, payments,
  transfers, partial-payment events, refunds, a collection a day; its owner logged in), with two
  metadata values a process (an order reference and an e-mail), so every process has its search
  rows; then, over those processes, what the service writes beside them: an event for each final
  process (process.completed, .expired, .cancelled) delivered to the merchant's webhook endpoint
  (its delivery and one attempt), of the last RETENTION_DAYS (90: the delivery worker prunes older
  final events, their deliveries and attempts; the partial-payment events likewise), an earlier
  choice
  (payment_choices) for 5 % of the payments, and the search rows (process_search) of the metadata;
- a test-mode shop with an owner: N / 10 processes in the same year, a third completed by the
  sandbox, with events and search rows;
- the list's shop with an owner: 1,000 processes made before the bulk (lower seq: "another
  merchant added many since");
- the preorder shop (test mode): its secret key; then overview_days rebuilt for all and VACUUM
  ANALYZE, as autovacuum leaves a table after such a load.
Then, `--rounds` (4) alternated (the order flipping each round), through one gunicorn per database
(gunicorn.conf.py as shipped, wsgi:app) on loopback, per database:
- preorders: `wrk -c16 -t2` for `--seconds` (10): req/s, p50, p99, and the CPU per preorder of the
  service's workers and of the whole PostgreSQL server together (the other side idle meanwhile);
- `/metrics`: 20 scrapes, median;
- the overview (`/dashboard/overview`) of the live shop and of the test shop, each owner logged in:
  3 untimed then 10 loads, median;
- the watcher's full read of what it watches (app/data/transfers.py watched_addresses: watch_list,
  filled by the loader as the service's writes and the chores' prune leave it, the monitoring
  window back from now), in this process on its own connection: 20 reads, median, and its floor,
  20 fetches of the same rows as the driver's plain tuples; then the chores' prune of it (one
  batch, committed: at steady state it finds little);
- the list's first page (`/dashboard/`) of the list's shop, its owner logged in: 10 loads, median;
- bytes per process: the database's size over its processes, and the largest tables.
With `--binary-floor`, the large database's big tables are also copied with every hash, address
and id as bytes, their indexes alike, to measure what such a schema would save (then dropped).
Targets (the large against the small): preorder req/s >= 0.9 x, p99 <= 1.25 x, CPU per preorder
<= 1.1 x; /metrics <= 50 ms; the watcher's read <= 20 ms; the overview <= 300 ms; the list's first
page about the same at both sizes. Prints the medians, their ratio and the median ratio of the
rounds run back to back (the least disturbed by other work), and writes
bench/results/scale-<UTC time>.json.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import requests
from psycopg.rows import tuple_row

from app.config import DEFAULTS
from app.data import overview as overview_rows
from app.data import transfers as transfer_rows
from app.domain import accounts
from app.domain.merchants import create as create_merchant
from bench import bodies, wrk
from bench.console import OWNER, PASSWORD
from bench.overview import DAY, make_side
from bench.servers import Gunicorn, children, cpu_seconds

TEST_OWNER, LIST_OWNER = "test-owner@bench.example", "list-owner@bench.example"
LIST_PROCESSES = 1_000
# Two values a process, as a shop's metadata: a unique order reference and a shared e-mail.
METADATA = ("'{\"orderRef\":\"A-' || i || '\",\"email\":\"buyer' || mod(i, 5000) ||"
            " '@example.com\"}'")
SEARCH_ROWS = (  # as app/migrations/postgresql/0006_console.sql and 0026 make them
    "INSERT INTO process_search (key, seq)"
    " SELECT CAST(CAST('x' || left(encode(sha256(convert_to(p.merchant_id || '/'"
    "  || lower(btrim(j.value)), 'UTF8')), 'hex'), 16) AS bit(64)) AS BIGINT), p.seq"
    " FROM processes p, jsonb_each_text(p.metadata::jsonb) j"
    " WHERE p.merchant_id = %s AND length(btrim(j.value)) BETWEEN 1 AND 200 ON CONFLICT DO NOTHING")


def _user(app, db, email, merchant_id, now):
    accounts.create_user(db, email=email, merchant_id=merchant_id, role="owner", password=PASSWORD,
                         now=now, hash_method=app.config["DASHBOARD_PASSWORD_HASH"])


def _processes(raw, merchant_id, n, now, *, livemode, first_seq=None, tag):
    """`n` processes of the merchant over the last year (a third completed, the rest expired or
    cancelled, those not yet expired pending), ids made of `tag`; with `first_seq`, numbered from
    it."""
    seq = "" if first_seq is None else "seq, "
    raw.execute(
        f"INSERT INTO processes ({seq}id, merchant_id, status, amount, metadata, livemode,"
        " created_at, updated_at, expires_at)"
        f" SELECT {'' if first_seq is None else f'{first_seq} + i, '}"
        f" '{tag}-0000-4000-8000-' || lpad(to_hex(i), 12, '0'), %s,"
        " CASE WHEN c + 1800 > %s THEN 'pending' WHEN mod(i, 3) = 0 THEN 'completed'"
        "  WHEN mod(i, 3) = 1 THEN 'expired' ELSE 'cancelled' END,"
        f" '10.00', {METADATA}, %s, c, c + 600, c + 1800"
        " FROM generate_series(1, %s) AS g(i), LATERAL (SELECT CAST(%s + i * %s AS BIGINT) AS c) t",
        (merchant_id, now, int(livemode), n, now - 365 * DAY, 365 * DAY / n))


def _side_tables(raw, merchant_id, now):
    """What the service writes beside the merchant's processes: a webhook endpoint; an event for
    each final process, delivered to it (its delivery and one attempt), for those final within
    RETENTION_DAYS (the delivery worker prunes older ones); an earlier choice for 5 % of its
    payments; its search rows."""
    endpoint = "we_" + merchant_id[4:]
    raw.execute(
        "INSERT INTO webhook_endpoints (id, merchant_id, url, events, enabled, secret, created_at)"
        " VALUES (%s, %s, 'https://shop.example/hooks', '*', 1, 'whsec_bench', %s)",
        (endpoint, merchant_id, now - 366 * DAY))
    raw.execute(
        "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at)"
        " SELECT 'evt_f' || md5(p.id), p.merchant_id, p.id, 'process.' || p.status,"
        " '{\"type\":\"process.' || p.status || '\",\"data\":{\"processId\":\"' || p.id || '\"}}',"
        " p.updated_at FROM processes p WHERE p.merchant_id = %s AND p.status <> 'pending'"
        " AND p.updated_at >= %s", (merchant_id, now - DEFAULTS["RETENTION_DAYS"] * DAY))
    raw.execute(
        "INSERT INTO deliveries (event_id, endpoint_id, merchant_id, status, attempts,"
        " delivered_at)"
        " SELECT e.id, %s, e.merchant_id, 'delivered', 1, e.created_at + 1"
        " FROM events e WHERE e.merchant_id = %s", (endpoint, merchant_id))
    raw.execute(
        "INSERT INTO delivery_attempts (event_id, endpoint_id, attempted_at, url, status_code,"
        " duration_ms)"
        " SELECT e.id, %s, e.created_at + 1, 'https://shop.example/hooks', 200, 40"
        " FROM events e WHERE e.merchant_id = %s", (endpoint, merchant_id))
    raw.execute(
        "INSERT INTO payment_choices (process_id, network_id, token_contract, decimals, created_at)"
        " SELECT p.process_id, p.network_id, '0x' || repeat('d', 40), 18, p.created_at"
        " FROM payments p WHERE p.merchant_id = %s AND mod(hashtext(p.process_id), 20) = 0",
        (merchant_id,))
    raw.execute(SEARCH_ROWS, (merchant_id,))


def build(folder, n, now):
    """One database of `n` bulk processes (the module's docstring): a dict of what the
    measurements need."""
    import psycopg

    started = time.perf_counter()
    app, _, live = make_side(folder, "postgresql", n, now, 365, metadata=METADATA,
                             events_since=now - DEFAULTS["RETENTION_DAYS"] * DAY)
    url = str(app.config["DATABASE"])
    db = app.extensions["db"]
    with app.app_context():
        test_shop, _ = create_merchant(db, name="Test shop", livemode=False, webhook_url=None,
                                       now=now)
        list_shop, _ = create_merchant(db, name="List shop", livemode=False, webhook_url=None,
                                       now=now)
        _, secret_key = create_merchant(db, name="Preorder shop", livemode=False, webhook_url=None,
                                        now=now)
        _user(app, db, TEST_OWNER, test_shop.id, now)
        _user(app, db, LIST_OWNER, list_shop.id, now)
    db.close_all()
    with psycopg.connect(url, autocommit=False) as raw:
        _processes(raw, test_shop.id, max(1, n // 10), now, livemode=False, tag="11111111")
        _processes(raw, list_shop.id, LIST_PROCESSES, now, livemode=False, tag="22222222",
                   first_seq=-LIST_PROCESSES - 1)  # before the bulk: seq -1000 … -1
        for merchant_id in (live, test_shop.id, list_shop.id):
            _side_tables(raw, merchant_id, now)
        raw.commit()
    with app.app_context():
        with db.transaction() as conn:
            overview_rows.rebuild(conn)
            # what the service's writes and the chores' prune leave watched: the window's
            transfer_rows.fill_watch_list(conn, now - DEFAULTS["PAYMENT_MONITORING_SECONDS"])
    db.close_all()
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("VACUUM ANALYZE")
        processes = raw.execute("SELECT count(*) FROM processes").fetchone()[0]
        size = raw.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        tables = raw.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r'"
            " AND relnamespace = 'public'::regnamespace ORDER BY 2 DESC LIMIT 8").fetchall()
    seconds = time.perf_counter() - started
    print(f"built {processes:,} processes in {seconds:.0f} s: {size / 1e9:.2f} GB,"
          f" {size / processes:.0f} bytes a process", flush=True)
    return {"app": app, "url": url, "secret_key": secret_key, "processes": processes,
            "build_seconds": round(seconds, 1), "bytes": size,
            "bytes_per_process": round(size / processes),
            "tables_bytes_per_process": {name: round(b / processes) for name, b in tables}}


def _bytes(column):
    return f"decode(substr({column}, 3), 'hex') AS {column}"


# Each large table as it would be with every hash, address and id as bytes (16-byte uuids and
# event ids, 4-byte merchant and endpoint ids, 2-byte network ids), its indexes alike.
BINARY = {
    "processes": "seq, id::uuid AS id, hashtext(merchant_id) AS merchant_id, status,"
                 " amount::numeric AS amount, metadata, livemode::int::bool AS livemode,"
                 " created_at, updated_at, expires_at, completed_by, currency, description,"
                 " success_url, cancel_url, checkout_base, link_id",
    "payments": f"process_id::uuid AS process_id, hashtext(merchant_id) AS merchant_id,"
                f" address_index, {_bytes('address')}, asset_id,"
                f" (hashtext(network_id) % 30000)::int2 AS network_id, chain_id,"
                f" {_bytes('token_contract')}, decimals, amount_due::numeric AS amount_due,"
                f" created_at, updated_at, mode, {_bytes('payout_address')}, {_bytes('factory')},"
                f" tolerance, quote",
    "transfers": f"chain_id, {_bytes('tx_hash')}, log_index,"
                 f" (hashtext(network_id) % 30000)::int2 AS network_id,"
                 f" process_id::uuid AS process_id, {_bytes('token_contract')},"
                 f" {_bytes('from_address')}, amount::numeric AS amount, block_number,"
                 f" {_bytes('block_hash')}, block_timestamp, status, seen_at, confirmed_at",
    "collection_items": f"collection_id, {_bytes('address')}, {_bytes('token')},"
                        f" process_id::uuid AS process_id, hashtext(merchant_id) AS merchant_id,"
                        f" {_bytes('payout_address')}, amount::numeric AS amount",
    "events": "seq, decode(md5(id), 'hex') AS id, hashtext(merchant_id) AS merchant_id,"
              " process_id::uuid AS process_id, type, payload, created_at",
    "deliveries": "seq, decode(md5(event_id), 'hex') AS event_id,"
                  " hashtext(endpoint_id) AS endpoint_id, hashtext(merchant_id) AS merchant_id,"
                  " status, attempts, next_attempt_at, lease_owner, lease_expires_at, last_error,"
                  " delivered_at",
    "delivery_attempts": "id, decode(md5(event_id), 'hex') AS event_id, attempted_at, url,"
                         " status_code, error, duration_ms, hashtext(endpoint_id) AS endpoint_id",
}


def binary_floor(url, processes) -> dict:
    """Bytes a process of each BINARY table as stored and as it would be in bytes, and of the
    whole database with those tables so (copies made, measured and dropped)."""
    import psycopg

    found = {}
    with psycopg.connect(url, autocommit=True) as raw:
        for table, columns in BINARY.items():
            raw.execute(f"CREATE TABLE {table}_bin AS SELECT {columns} FROM {table}")
            for name, index in raw.execute(
                    "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
                    " WHERE indrelid = %s::regclass", (table,)).fetchall():
                raw.execute(index.replace(f" ON public.{table} ", f" ON public.{table}_bin ")
                            .replace(f"INDEX {name} ", f"INDEX {name}_bin "))
            raw.execute(f"VACUUM ANALYZE {table}_bin")
            text, binary = (raw.execute(f"SELECT pg_total_relation_size('{t}')").fetchone()[0]
                            for t in (table, f"{table}_bin"))
            raw.execute(f"DROP TABLE {table}_bin")
            found[table] = (round(text / processes), round(binary / processes))
        size = raw.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    found["database"] = (round(size / processes), round(
        size / processes - sum(text - binary for text, binary in found.values())))
    return found


def login(base_url, email):
    session = requests.Session()
    page = session.get(base_url + "/dashboard/login", timeout=60)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    answer = session.post(base_url + "/dashboard/login", allow_redirects=False, timeout=60,
                          data={"email": email, "password": PASSWORD, "csrf_token": token})
    assert answer.status_code == 303, (email, answer.status_code)
    return session


def timed(call, count, warm_up=3):
    """Median milliseconds of `count` calls after `warm_up` untimed ones; every answer 200."""
    for _ in range(warm_up):
        call()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        status = call()
        times.append((time.perf_counter() - started) * 1000)
        assert status == 200, status
    return round(statistics.median(times), 2)


def postgres_cpu(url):
    """CPU seconds of the whole PostgreSQL server (postmaster and every backend) serving `url`."""
    from bench import postgres

    pid = int(Path(postgres._server.data, "postmaster.pid").read_text().split()[0])
    return sum(cpu_seconds(p) for p in [pid, *children(pid)] if p)


FLOOR_READ = ("SELECT process_id, address, token_contract, expires_at, network_id FROM watch_list"
              " WHERE livemode = 1")


def watched_read(app, now):
    """(median ms of 20 full reads of the live mode's watched set, of 20 fetches of the same rows
    as the driver's plain tuples (its floor), its rows, ms of the chores' prune of it then, rows
    pruned)."""
    db = app.extensions["db"]
    since = now - DEFAULTS["PAYMENT_MONITORING_SECONDS"]
    with app.app_context():
        conn = db.connection()
        rows = len(transfer_rows.watched_addresses(conn, True))
        ms = timed(lambda: (transfer_rows.watched_addresses(conn, True), 200)[1], 20)
        floor_ms = timed(lambda: (conn.raw.cursor(row_factory=tuple_row).execute(
            FLOOR_READ).fetchall(), 200)[1], 20)
        started = time.perf_counter()
        with db.transaction() as tx:
            pruned = transfer_rows.prune_watch_list(tx, since, 1_000)
        prune_ms = (time.perf_counter() - started) * 1000
    db.close_all()
    return ms, floor_ms, rows, round(prune_ms, 1), pruned


def measure(side, server, body_file, seconds, now):
    base = server.base_url
    cpu_before, pg_before = server.workers_cpu_seconds(), postgres_cpu(side["url"])
    w = wrk.run(base, body_file=body_file, secret_key=side["secret_key"], duration=seconds)
    cpu = server.workers_cpu_seconds() - cpu_before + postgres_cpu(side["url"]) - pg_before
    assert w["non2xx"] == 0, w["statuses"]
    scraper, live, test, lister = (requests.Session(), side["sessions"]["live"],
                                   side["sessions"]["test"], side["sessions"]["list"])
    ms, floor_ms, rows, prune_ms, pruned = watched_read(side["app"], now)
    return {
        "preorder_rps": w["rps"], "preorder_p50_ms": w["p50_ms"], "preorder_p99_ms": w["p99_ms"],
        "preorder_cpu_ms": round(cpu * 1000 / w["requests"], 3),
        "metrics_ms": timed(lambda: scraper.get(base + "/metrics", timeout=60).status_code, 20),
        "overview_live_ms": timed(
            lambda: live.get(base + "/dashboard/overview", timeout=60).status_code, 10),
        "overview_test_ms": timed(
            lambda: test.get(base + "/dashboard/overview", timeout=60).status_code, 10),
        "watched_read_ms": ms, "watched_floor_ms": floor_ms, "watched_rows": rows,
        "watch_prune_ms": prune_ms,
        "watch_pruned": pruned,
        "list_first_page_ms": timed(
            lambda: lister.get(base + "/dashboard/", timeout=60).status_code, 10),
    }


FIGURES = ("preorder_rps", "preorder_p50_ms", "preorder_p99_ms", "preorder_cpu_ms", "metrics_ms",
           "overview_live_ms", "overview_test_ms", "watched_read_ms", "watched_floor_ms",
           "watch_prune_ms",
           "list_first_page_ms")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.scale",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=1_000_000,
                        help="the large database's bulk")
    parser.add_argument("--small", type=int, default=10_000, help="the small database's bulk")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=10, help="of preorders, a round and a side")
    parser.add_argument("--binary-floor", action="store_true",
                        help="also measure the large database's bytes with ids and hashes as bytes")
    args = parser.parse_args(argv)
    wrk.require_wrk()
    now = int(time.time())
    result = {"sizes": {"small": args.small, "large": args.processes}, "rounds": args.rounds,
              "load_average": {"before": os.getloadavg()}, "sides": {}}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as folder:
        sides = {name: build(folder, n, now) for name, n in (("small", args.small),
                                                             ("large", args.processes))}
        if args.binary_floor:
            result["binary_floor"] = binary_floor(sides["large"]["url"],
                                                  sides["large"]["processes"])
            print("bytes a process (as stored, in bytes):", result["binary_floor"], flush=True)
        body_file = Path(folder) / "preorder.json"
        body_file.write_text(bodies.compact(bodies.preorder_body()))
        servers = {}
        try:
            for name, side in sides.items():
                servers[name] = Gunicorn(f"scale-{name}", "wsgi:app", Path(folder) / f"{name}.log",
                                         {"FLASK_DATABASE": side["url"]}).start()
                base = servers[name].base_url
                side["sessions"] = {"live": login(base, OWNER), "test": login(base, TEST_OWNER),
                                    "list": login(base, LIST_OWNER)}
                side["rounds"] = []
            for r in range(args.rounds):
                for name in (("small", "large") if r % 2 == 0 else ("large", "small")):
                    figures = measure(sides[name], servers[name], body_file, args.seconds, now)
                    sides[name]["rounds"].append(figures)
                    print(f"round {r + 1} {name}: {figures}", flush=True)
            alarms = {name: server.log_alarms()[:10] for name, server in servers.items()}
        finally:
            for server in servers.values():
                server.stop()
    for name, side in sides.items():
        result["sides"][name] = {
            "processes": side["processes"], "build_seconds": side["build_seconds"],
            "bytes_per_process": side["bytes_per_process"],
            "tables_bytes_per_process": side["tables_bytes_per_process"],
            "median": {k: statistics.median(r[k] for r in side["rounds"]) for k in FIGURES},
            "rounds": side["rounds"], "log_alarms": alarms[name]}
    small, large = (result["sides"][s]["median"] for s in ("small", "large"))
    result["ratios"] = {k: round(large[k] / small[k], 3) if small[k] else None for k in FIGURES}
    # Round n of both sides ran back to back: the median of those pairs' ratios is the least
    # disturbed by other work on the machine.
    pairs = list(zip(sides["small"]["rounds"], sides["large"]["rounds"], strict=True))
    result["pair_ratios"] = {k: round(statistics.median(b[k] / a[k] for a, b in pairs if a[k]), 3)
                             for k in FIGURES}
    result["load_average"]["after"] = os.getloadavg()
    print(f"\n{'medians':<22} {args.small:>12,} {args.processes:>12,} {'ratio':>7} {'pairs':>7}")
    for k in FIGURES:
        print(f"{k:<22} {small[k]:>12.2f} {large[k]:>12.2f} {result['ratios'][k]:>7}"
              f" {result['pair_ratios'][k]:>7}")
    for name in ("small", "large"):
        s = result["sides"][name]
        print(f"{name}: {s['processes']:,} processes built in {s['build_seconds']:.0f} s,"
              f" {s['bytes_per_process']} bytes a process {s['tables_bytes_per_process']}")
    print("watched rows (small, large):", [sides[n]["rounds"][-1]["watched_rows"]
                                            for n in ("small", "large")])
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (results / f"scale-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
