"""The console's overview and money filters at a million processes, on SQLite and on PostgreSQL:
`python -m bench.overview [--processes N] [--days D] [--requests N] [--backend sqlite|postgresql]`.

One live merchant in the payout mode with a year of history (`--days`, 365): N processes D days / N
apart (a busy shop: about 2,700 a day at a million); of them 60 % completed with a payment and its
confirmed transfer (USDC, 6 decimals), 3 % expired partly paid (with their payment.partial event),
1 % of all refunded (completed ones), the rest expired or cancelled without money; a collection
every day took the previous days' payments (`load`'s `mix` can also complete a share without a
payment, as the operator does in live mode: bench/overview_load.py's month). Loaded by one
INSERT … SELECT per table (a recursive CTE on SQLite, generate_series on PostgreSQL), then ANALYZE
(and on PostgreSQL VACUUM, as autovacuum would after such a load). Through the Flask test client
logged in as the owner (the server's own time, no network): the overview page and the list filtered
by each money filter, p50/p95 over `requests` requests after 5 untimed ones.
Target: the overview's p95 <= 300 ms on both backends. The floor beside it: one count(*) of the
merchant's processes (what any page that shows "how many" costs). Prints a table and writes
bench/results/overview-<UTC timestamp>.json.
"""
import argparse
import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path

from app import create_app
from app.data import overview as overview_rows
from bench.console import logged_in, merchant_with_owner

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
FACTORY = "0x" + "fa" * 20
PAYOUT = "0x" + "ab" * 20
DAY = 86_400
YEAR_MIX = (60, 3, 0)  # percent of the processes: completed with a payment, expired partly paid,
# completed without a payment; the rest expired or cancelled without money


def _numbers(dialect, n):
    if dialect == "postgresql":
        return f"SELECT i FROM generate_series(1, {n}) AS g(i)"
    return (f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n})"
            " SELECT i FROM g")


def _hex(dialect, expr, width):
    if dialect == "postgresql":
        return f"lpad(to_hex({expr}), {width}, '0')"
    return f"printf('%0{width}x', {expr})"


def load(conn, dialect, merchant_id, n, now, days=365, mix=YEAR_MIX, metadata="'{}'",
         events_since=0):
    """The merchant's `days`: processes, payments, transfers, refunds and collections (see above);
    `mix`: the percent completed with a payment, expired partly paid and completed without one;
    `metadata`: each process's, an SQL expression of `i` (its number, 1 to n)."""
    start, step = now - days * DAY, days * DAY / n
    pid = f"'{'0' * 8}-0000-4000-8000-' || {_hex(dialect, 'i', 12)}"
    created = f"CAST({start} + i * {step} AS BIGINT)" if dialect == "postgresql" \
        else f"CAST({start} + i * {step} AS INTEGER)"
    kind, (paid, partly, by_hand) = "(i % 100)", mix  # paid, partly paid, by hand, the rest
    status = (f"CASE WHEN {kind} < {paid} THEN 'completed'"
              f" WHEN {kind} < {paid + partly} THEN 'expired'"
              f" WHEN {kind} < {paid + partly + by_hand} THEN 'completed'"
              f" WHEN {kind} < 90 THEN 'expired' ELSE 'cancelled' END")
    numbers = _numbers(dialect, n)
    conn.execute(
        "INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode, created_at,"
        " updated_at, expires_at)"
        f" SELECT {pid}, '{merchant_id}', {status}, '25.00', {metadata}, 1,"
        f" {created}, {created} + 600, {created} + 1800 FROM ({numbers}) AS g")
    with_money = f"{kind} < {paid + partly}"
    conn.execute(
        "INSERT INTO payments (process_id, merchant_id, address_index, address, asset_id,"
        " network_id, chain_id, token_contract, decimals, amount_due, created_at, updated_at, mode,"
        " payout_address, factory)"
        f" SELECT {pid}, '{merchant_id}', NULL, '0x' || {_hex(dialect, 'i', 40)}, 'usdc',"
        " 'polygon', 137,"
        f" '{USDC}', 6, '25000000', {created}, {created}, 'payout', '{PAYOUT}', '{FACTORY}'"
        f" FROM ({numbers}) AS g WHERE {with_money}")
    amount = f"CASE WHEN {kind} < {paid} THEN '25000000' ELSE '12500000' END"
    conn.execute(
        "INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
        " token_contract, from_address, amount, block_number, block_hash, block_timestamp, status,"
        " seen_at, confirmed_at)"
        f" SELECT 137, '0x' || {_hex(dialect, 'i', 64)}, 0, 'polygon', {pid}, '{USDC}', '{PAYOUT}',"
        f" {amount}, i, '0x' || {_hex(dialect, 'i', 64)}, {created} + 300, 'confirmed',"
        f" {created} + 300,"
        f" {created} + 600 FROM ({numbers}) AS g WHERE {with_money}")
    conn.execute(  # the watcher's report of each partial payment
        "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at)"
        f" SELECT 'evt_' || {_hex(dialect, 'i', 32)}, '{merchant_id}', {pid}, 'payment.partial',"
        " '{}',"
        f" {created} + 600 FROM ({numbers}) AS g WHERE {kind} >= {paid} AND {with_money}"
        f" AND {created} + 600 >= {events_since}")
    conn.execute(
        "INSERT INTO refunds (id, process_id, merchant_id, status, asset_id, network_id, chain_id,"
        " token_contract, decimals, amount, address, created_at, updated_at, scanned_block,"
        " tx_hash, log_index, block_number)"
        f" SELECT 'rf_' || {_hex(dialect, 'i', 32)}, {pid}, '{merchant_id}', 'completed', 'usdc',"
        " 'polygon',"
        f" 137, '{USDC}', 6, '5000000', '{PAYOUT}', {created} + 3600, {created} + 7200, i,"
        f" '0x' || {_hex(dialect, 'i + 7', 64)}, 1, i FROM ({numbers}) AS g WHERE i % 100 = 7")
    for day in range(days - 1):  # one confirmed collection a day, of the processes before it
        conn.execute(
            "INSERT INTO collections (network_id, chain_id, factory, sender, nonce, tx_hash,"
            " raw_tx, gas_limit, max_fee_per_gas, status, block_number, created_at, settled_at)"
            f" VALUES ('polygon', 137, '{FACTORY}', '{PAYOUT}', ?, ?, '0x', 1, '1', 'confirmed',"
            " ?, ?, ?)",
            (day, "0x" + f"{day:064x}", int((day + 1) * n / days) + 1, start + (day + 1) * DAY,
             start + (day + 1) * DAY))
    conn.execute(
        "INSERT INTO collection_items (collection_id, address, token, process_id, merchant_id,"
        " payout_address, amount)"
        f" SELECT c.id, p.address, '{USDC}', p.process_id, p.merchant_id, '{PAYOUT}', '25000000'"
        " FROM payments p JOIN collections c"
        f" ON c.nonce = CAST((p.created_at - {start}) / {DAY} AS INTEGER)"
        f" WHERE p.created_at < {now - DAY}")
    conn.execute("ANALYZE")


def make_side(folder, dialect, n, now, days=365, mix=YEAR_MIX, metadata="'{}'", events_since=0):
    """(app, logged-in client, merchant id) of a database holding the merchant's `days` (its events
    since `events_since` only: what a retention leaves)."""
    if dialect == "postgresql":
        from bench.postgres import database_url
        target = database_url()
    else:
        target = str(Path(folder) / f"overview-{n}.sqlite3")
    app = create_app({"DATABASE": target, "CLOCK": lambda: now})
    with app.app_context():
        merchant = merchant_with_owner(app, now, livemode=True)
        db = app.extensions["db"]
        started = time.perf_counter()
        with db.transaction() as conn:
            conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                         " start_block, scanned_block, head_block, created_at)"
                         " VALUES ('polygon', 'Polygon PoS', 137,"
                         " 'http://127.0.0.1:1', 12, 1, 1, 1, ?)", (now,))
            conn.execute("INSERT INTO assets (id, network_id, symbol, name, contract, decimals,"
                         " created_at)"
                         " VALUES ('usdc', 'polygon', 'USDC', 'USD Coin', ?, 6, ?)", (USDC, now))
            conn.execute("INSERT INTO network_factories (network_id, address, tx_hash, created_at,"
                         " version) VALUES ('polygon', ?, ?, ?, 2)",
                         (FACTORY, "0x" + "fb" * 32, now))  # payout mode's
            load(conn, dialect, merchant.id, n, now, days, mix, metadata, events_since)
            overview_rows.rebuild(conn)  # the sums, as init-db builds them for rows loaded thus
        if dialect == "postgresql":  # as autovacuum leaves a table after a load: visibility map set
            import psycopg
            with psycopg.connect(target, autocommit=True) as raw:
                raw.execute("VACUUM ANALYZE")
        print(f"{dialect}: loaded {n:,} processes in {time.perf_counter() - started:.0f} s",
              flush=True)
    return app, logged_in(app), merchant.id


WARM_UP = 5  # untimed requests first: the figures are the steady state's, not a cold cache's


def timed(client, url, requests):
    for _ in range(WARM_UP):
        client.get(url)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code)
    return times


def floor(app, merchant_id, requests):
    """One count(*) of the merchant's processes, through the app's own connection."""
    times = []
    with app.app_context():
        conn = app.extensions["db"].connection()
        for _ in range(requests):
            started = time.perf_counter()
            conn.execute("SELECT count(*) FROM processes WHERE merchant_id = ?",
                         (merchant_id,)).fetchone()
            times.append(time.perf_counter() - started)
    return times


def p(values, q):
    return (statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1
            else values[0])


URLS = {"overview": "/dashboard/overview", "money=partly": "/dashboard/?money=partly",
        "money=refunded": "/dashboard/?money=refunded", "money=paid": "/dashboard/?money=paid",
        "asset=usdc": "/dashboard/?asset=usdc"}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.overview",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=365,
                        help="the span of the processes (default 365)")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), action="append")
    args = parser.parse_args(argv)
    now = int(time.time())
    result = {"processes": args.processes, "days": args.days, "requests": args.requests,
              "backends": {}}
    with tempfile.TemporaryDirectory(prefix="bench-overview-") as folder:
        for dialect in args.backend or ("sqlite", "postgresql"):
            app, client, merchant_id = make_side(folder, dialect, args.processes, now, args.days)
            figures = {}
            for name, url in URLS.items():
                times = timed(client, url, args.requests)
                figures[name] = {"p50_ms": p(times, 50) * 1000, "p95_ms": p(times, 95) * 1000}
            base = floor(app, merchant_id, args.requests)
            figures["floor count(*)"] = {"p50_ms": p(base, 50) * 1000, "p95_ms": p(base, 95) * 1000}
            overview = figures["overview"]
            overview["p50_ratio_to_floor"] = (overview["p50_ms"]
                                              / figures["floor count(*)"]["p50_ms"])
            result["backends"][dialect] = figures
            app.extensions["db"].close_all()
            print(f"\n{dialect} at {args.processes:,} processes   {'p50':>9} {'p95':>9}")
            for name, f in figures.items():
                print(f"{name:<32} {f['p50_ms']:>7.1f}ms {f['p95_ms']:>7.1f}ms")
            print(f"overview p50 / floor p50: {figures['overview']['p50_ratio_to_floor']:.2f}")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (results / f"overview-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    worst = max(f["overview"]["p95_ms"] for f in result["backends"].values())
    print(f"\nworst overview p95 {worst:.0f} ms (target <= 300 ms)")
    return 0 if worst <= 300 else 1


if __name__ == "__main__":
    raise SystemExit(main())
