"""Chain watcher scenario, against a real Hardhat node on loopback (tests/chain, `npm ci` first):

1. catch-up: `--watch-blocks` blocks (10,000) holding `--watch-transfers` token transfers (1,000),
   each to its own pending deposit address, among `--watch-watched` watched addresses (as many; the
   others are never paid), on `--watch-backend` (SQLite or PostgreSQL). Sides, alternated each
   round, each on a fresh copy of the seeded database:
   - service: `flask --app app watch-payments --once`;
   - floor (durable): `python -m bench.watcher durable-floor`: the watcher's eth_getLogs calls, one
     read of the watched addresses, the headers from each range's lowest paying block to its last,
     linked by parent hashes, then per
     transfer an INSERT of the transfer, an UPDATE of its process and an outbox INSERT with a
     payload of the real event's size, the scan position, one commit per range; on PostgreSQL
     also `floor-many`, the same rows written with executemany;
   - loop: `python -m bench.watcher floor`, the same eth_getLogs calls parsed, nothing else.
   Rate = blocks / seconds from the first RPC call to the end of the pass (measured inside each
   process); the wall clock and the processes' CPU seconds (start-up included) beside it. The
   service must record every transfer once and complete every process.
2. steady state (`--watch-samples` > 0, SQLite): `watch-payments` looping with --poll-interval P and
   `--watch-idle` idle watched addresses; K times a transfer is sent, then its confirmations are
   mined at once (t0); latency = when its `payment.completed` is in the database (read every 5 ms)
   - t0. Polls start every P, so max - min (the wait for the next poll) should stay under P. Then
   the poll's own work, timed in this process on the same database: the median of 10 polls that
   each find one new (empty) block, and of 10 that find none; alternated with them, a minimal
   poller's (the head, eth_getLogs of the new blocks, the position written, one commit), and the
   RPC calls (a batch's each) and HTTP requests of each kind of poll.
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

from bench import service, stats
from bench.servers import ROOT, free_port

CHAIN_DIR = ROOT / "tests" / "chain"
CONFIRMATIONS = 12
MAX_RANGE = 2000
MAX_ADDRESSES = 500


class Node:
    def __init__(self, log_path):
        cli = CHAIN_DIR / "node_modules" / "hardhat" / "internal" / "cli" / "cli.js"
        if not cli.exists() or not shutil.which("node"):
            raise RuntimeError("Node.js and tests/chain's npm packages are needed"
                               " (make test installs them)")
        port = free_port()
        env = dict(os.environ, HARDHAT_DISABLE_TELEMETRY_PROMPT="true", CI="true")
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(["node", str(cli), "node", "--hostname", "127.0.0.1", "--port",
                                      str(port)], cwd=CHAIN_DIR, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}/"
        self.session = requests.Session()
        deadline = time.monotonic() + 60
        while True:
            try:
                self.rpc("eth_blockNumber")
                break
            except requests.RequestException:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("hardhat node did not start") from None
                time.sleep(0.1)
        self.accounts = self.rpc("eth_accounts")
        build = json.loads((CHAIN_DIR / "token" / "TestUSD.json").read_text())
        tx = self.rpc("eth_sendTransaction", {"from": self.accounts[0],
                                              "data": build["bytecode"] + format(10**15, "064x")})
        self.token = self.rpc("eth_getTransactionReceipt", tx)["contractAddress"].lower()

    def rpc(self, method, *params):
        body = self.session.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                 "params": list(params)}, timeout=60).json()
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body["result"]

    def head(self):
        return int(self.rpc("eth_blockNumber"), 16)

    def transfer(self, to, amount):
        data = "0xa9059cbb" + to[2:].rjust(64, "0") + format(amount, "064x")
        return self.rpc("eth_sendTransaction", {"from": self.accounts[0], "to": self.token,
                                                "data": data})

    def mine(self, blocks):
        """`blocks` empty blocks, one evm_mine each (in batches): hardhat_mine's several blocks at
        once carry zero parent hashes, and the watcher links blocks by them."""
        for start in range(0, blocks, 500):
            batch = [{"jsonrpc": "2.0", "id": i, "method": "evm_mine", "params": []}
                     for i in range(min(500, blocks - start))]
            answers = self.session.post(self.url, json=batch, timeout=120).json()
            if any("error" in a for a in answers):
                raise RuntimeError(f"evm_mine: {answers[0]}")

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


def _addresses(n, salt):
    return ["0x" + format(salt * 10**6 + i + 1, "040x") for i in range(n)]


TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def topic_of(address):
    return "0x" + "0" * 24 + address[2:].lower()


def floor_main(url, token, first, last, addresses_file, max_addresses):
    """The plain loop: the same eth_getLogs calls as the watcher makes, parsed, nothing else."""
    recipients = sorted(Path(addresses_file).read_text().split())
    started = time.perf_counter()
    session, calls, logs = requests.Session(), 0, 0
    for start in range(first, last + 1, MAX_RANGE):
        end = min(last, start + MAX_RANGE - 1)
        found, made = _range_logs(session, url, token, start, end, recipients, max_addresses)
        calls, logs = calls + made, logs + len(found)
    print(json.dumps({"calls": calls, "logs": logs, "seconds": time.perf_counter() - started}))


def _post(session, url, method, *params):
    body = session.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                   "params": list(params)}, timeout=(5, 20)).json()
    return body["result"]


def _get_logs(session, url, token, start, end, chunk):
    topics = [TRANSFER_TOPIC] if chunk is None else [TRANSFER_TOPIC, None,
                                                     [topic_of(a) for a in chunk]]
    return _post(session, url, "eth_getLogs", {"fromBlock": hex(start), "toBlock": hex(end),
                                               "address": [token], "topics": topics})


def _range_logs(session, url, token, start, end, recipients, max_addresses):
    """The watcher's eth_getLogs calls for a range: one per address chunk, or one for all the
    token's transfers when the addresses take more than one (app/chain/watcher/window.py); (logs,
    calls)."""
    if len(recipients) > max_addresses:
        return _get_logs(session, url, token, start, end, None), 1
    return _get_logs(session, url, token, start, end, recipients), 1


def durable_floor_main(url, token, first, last, database, max_addresses, payload_bytes, many):
    """The durable floor: what any watcher must do to record a catch-up durably and safely, and
    nothing else. One read of the watched addresses; per range its eth_getLogs calls (same ranges
    and chunks as the watcher), then the headers from the lowest block holding a payment to the
    range's last, 1,000 to a batch, each naming the one below as its parent (what proves a log's
    block an ancestor of the range's last whichever node answered; each log's block hash must be
    its block's, as the contract requires; the block's timestamp is recorded), then in one
    transaction per transfer an INSERT of the transfer, an UPDATE of its process and an outbox
    INSERT with a payload of the real size; the head, the range's last block kept (what the next
    read is proven against) and the kept blocks pruned, as the watcher's step does; the scan
    position; one durable commit. `many`: each range's rows with executemany."""
    from app.config import DEFAULTS
    from app.data import transfers as transfer_rows
    from app.db import open_database

    db = open_database(database, DEFAULTS)
    payload = "x" * payload_bytes
    session, calls, logs = requests.Session(), 0, 0
    started = time.perf_counter()
    watched = {row["address"].lower(): (row["process_id"], row["merchant_id"]) for row in
               db.connection().execute("SELECT address, process_id, merchant_id FROM payments"
                                       " WHERE network_id = 'bench'")}
    recipients = sorted(watched)
    now = int(time.time())
    for start in range(first, last + 1, MAX_RANGE):
        end = min(last, start + MAX_RANGE - 1)
        found, made = _range_logs(session, url, token, start, end, recipients, max_addresses)
        calls += made
        paying = [e for e in found if "0x" + e["topics"][2][-40:] in watched]
        lowest = min((int(e["blockNumber"], 16) for e in paying), default=end)
        headers = {}
        for chunk in range(lowest, end + 1, 1000):  # as the watcher's batches
            headers.update(_headers(session, url, range(chunk, min(end, chunk + 999) + 1)))
            calls += 1
        for n in range(lowest, end):  # each paying block an ancestor of the range's last
            if headers[n + 1]["parentHash"] != headers[n]["hash"]:
                raise RuntimeError("a block does not extend the one below")
        logs += len(found)
        transfers, processes, events = [], [], []
        for entry in paying:
            header = headers[int(entry["blockNumber"], 16)]
            if header is None or header["hash"] != entry["blockHash"]:
                raise RuntimeError("a log's block is not the chain's")
            process_id, merchant_id = watched["0x" + entry["topics"][2][-40:]]
            transfers.append((31337, entry["transactionHash"], int(entry["logIndex"], 16), "bench",
                              process_id, entry["address"], "0x" + entry["topics"][1][-40:],
                              str(int(entry["data"], 16)), int(entry["blockNumber"], 16),
                              entry["blockHash"], int(header["timestamp"], 16), "confirmed", now,
                              now))
            processes.append((now, process_id))
            events.append(("evt_" + uuid.uuid4().hex, merchant_id, process_id, "payment.completed",
                           payload, now, now))
        sqls = ("INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
                " token_contract, from_address, amount, block_number, block_hash, block_timestamp,"
                " status, seen_at, confirmed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                "UPDATE processes SET status = 'completed', updated_at = ? WHERE id = ?",
                "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at,"
                " status, attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)")
        with db.transaction() as conn:
            if many and transfers:
                for sql, rows in zip(sqls, (transfers, processes, events), strict=True):
                    conn.executemany(sql, rows)
            else:
                for row in zip(transfers, processes, events, strict=True):
                    for sql, values in zip(sqls, row, strict=True):
                        conn.execute(sql, values)
            tip = headers[end]
            transfer_rows.set_head(conn, "bench", last)
            transfer_rows.save_block(conn, "bench", end, tip["hash"], tip["parentHash"],
                                     int(tip["timestamp"], 16))
            transfer_rows.prune_blocks(conn, "bench", end - 64, 64)
            conn.execute("UPDATE networks SET scanned_block = ? WHERE id = 'bench'", (end,))
    seconds = time.perf_counter() - started
    db.close_all()
    print(json.dumps({"calls": calls, "logs": logs, "seconds": seconds}))


def _headers(session, url, numbers):
    """{number: header} of `numbers`, in one JSON-RPC batch."""
    numbers = sorted(numbers)
    body = session.post(url, json=[{"jsonrpc": "2.0", "id": i, "method": "eth_getBlockByNumber",
                                    "params": [hex(n), False]} for i, n in enumerate(numbers)],
                        timeout=(5, 20)).json()
    by_id = {item["id"]: item["result"] for item in body}
    return {n: by_id[i] for i, n in enumerate(numbers)}


def _timed(cmd, env):
    """(wall seconds, CPU seconds (user + system, start-up included), the finished process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[3:5]} failed: {done.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, done


class _Databases:
    """Fresh copies of a seeded template database: SQLite files, or PostgreSQL databases made
    from a template on the run's server (bench/postgres.py)."""

    def __init__(self, workdir, backend):
        self.workdir, self.backend, self.made = workdir, backend, 0
        if backend == "postgresql":
            from bench import postgres

            self.template = postgres.database_url()
            self.server = postgres._server
        else:
            self.template = str(workdir / "watch-template.sqlite3")

    def copy(self):
        self.made += 1
        if self.backend == "postgresql":
            return self.server.create_database(template=self.template.rsplit("/", 1)[1])
        path = self.workdir / f"watch-{self.made}.sqlite3"
        shutil.copy(self.template, path)
        return str(path)

    def drop(self, target):
        if self.backend == "postgresql":
            self.server.drop_database(target)
        else:
            Path(target).unlink(missing_ok=True)


def _payload_bytes(db, process_ids):
    from app.config import DEFAULTS
    from app.data import outbox as event_rows
    from app.db import open_database

    database = open_database(db, DEFAULTS)
    try:
        events = event_rows.for_process(database.connection(), process_ids[0])
        return max(len(e.payload) for e in events)
    finally:
        database.close_all()


def run(opts, workdir):
    from bench import seed

    blocks, transfers = opts.watch_blocks, opts.watch_transfers
    watched, max_addresses = (max(opts.watch_watched or transfers, transfers),
                              opts.watch_max_addresses)
    backend = opts.watch_backend
    node = Node(workdir / "hardhat.log")
    failures, proxy = [], None
    try:
        # The chain: `transfers` transfers spread evenly over `blocks` blocks, then the
        # confirmations.
        first = node.head() + 1
        addresses = _addresses(transfers, 1)
        gap = blocks // transfers
        for address in addresses:
            node.transfer(address, 10**6)
            node.mine(gap - 1)
        node.mine(CONFIRMATIONS)
        last = node.head()
        databases = _Databases(workdir, backend)
        template = databases.template
        service.init_db(template)
        merchant = service.create_merchant(template)
        idle = _addresses(watched - transfers, 3)  # watched, never paid
        process_ids = seed.seed_payments(template, merchant["merchantId"], node.url, node.token,
                                         first, addresses + idle, CONFIRMATIONS)[:transfers]
        (workdir / "addresses.txt").write_text("\n".join(addresses + idle))
        watch = service.flask_command("watch-payments", "--once", "--max-range", str(MAX_RANGE),
                                      "--max-addresses", str(max_addresses))
        warm = databases.copy()  # one unrecorded pass: caches warm, the real event's size
        _timed(watch, service.flask_env(warm))
        payload = _payload_bytes(warm, process_ids)
        databases.drop(warm)
        sides = ["loop", "floor", "service"] + (["floor-many"] if backend == "postgresql" else [])
        if opts.watch_latency_ms:  # a provider across a network: both sides through one proxy
            proxy = _latency_proxy(node.url, opts.watch_latency_ms / 1000)
            sides += ["floor-latency", "service-latency"]
        rounds = {side: [] for side in sides}  # wall seconds, process start to exit
        inside = {side: [] for side in sides}  # seconds from the first RPC call to the last commit
        cpu = {side: [] for side in sides}  # CPU seconds of the process, start-up included
        calls = {}
        for round_no in range(opts.watch_rounds):
            for side in (sides if round_no % 2 == 0 else sides[::-1]):
                if side == "loop":
                    seconds, cpu_seconds, done = _timed(
                        [sys.executable, "-m", "bench.watcher", "floor", node.url, node.token,
                         str(first), str(last), str(workdir / "addresses.txt"), str(max_addresses)],
                        dict(os.environ))
                    calls[side] = json.loads(done.stdout)
                    inside[side].append(calls[side]["seconds"])
                elif side.startswith("floor"):
                    db = databases.copy()
                    url = proxy.url if side.endswith("-latency") else node.url
                    seconds, cpu_seconds, done = _timed(
                        [sys.executable, "-m", "bench.watcher", "durable-floor", url,
                         node.token, str(first), str(last), db, str(max_addresses), str(payload),
                         "many" if side == "floor-many" else "one"], dict(os.environ))
                    calls[side] = json.loads(done.stdout)
                    inside[side].append(calls[side]["seconds"])
                    databases.drop(db)
                else:
                    db = databases.copy()
                    if side.endswith("-latency"):
                        _point_at(db, proxy.url)
                    seconds, cpu_seconds, done = _timed(watch, service.flask_env(db))
                    summary = next(line.split("watch: ", 1)[1] for line in
                                   done.stderr.splitlines() if "RPC calls" in line)
                    calls[side] = summary.split(", ", 1)[1]
                    inside[side].append(float(summary.split()[3]))
                    counts = seed.watch_outcome(db, process_ids)
                    # Deep enough when first seen: no payment.pending, one payment.completed each.
                    if counts != {"transfers": transfers, "payment.completed": transfers}:
                        failures.append(f"round {round_no}: {counts}")
                    databases.drop(db)
                rounds[side].append(seconds)
                cpu[side].append(round(cpu_seconds, 3))
        median = {side: stats.median_of([{"s": s} for s in v], "s") for side, v in rounds.items()}
        median_inside = {side: stats.median_of([{"s": s} for s in v], "s")
                         for side, v in inside.items()}
        rate = {side: (last - first + 1) / median_inside[side] for side in median_inside}
        wall_rate = {side: (last - first + 1) / median[side] for side in median}
        steady = None
        if opts.watch_samples:
            try:
                steady = _steady_state(node, workdir, opts)
            except RuntimeError as e:  # a watcher too slow to settle in time: the catch-up stays
                failures.append(f"steady state: {e}")
    finally:
        if proxy is not None:
            proxy.close()
        node.close()
    ratios = {f"service_vs_{side}": stats.ratio(rate["service"], rate[side])
              for side in sides if not side.startswith("service")}
    ratios["service_vs_floor_wall"] = stats.ratio(wall_rate["service"], wall_rate["floor"])
    targets = [stats.target("watcher catch-up / durable floor", ratios["service_vs_floor"],
                            at_least=0.80)]
    if proxy is not None:  # in time: the service's pass ≤ 1.25 × the floor's, both behind the proxy
        ratios["service_vs_floor_latency_time"] = stats.ratio(median_inside["service-latency"],
                                                              median_inside["floor-latency"])
        targets.append(stats.target(
            f"catch-up time / durable floor's, {opts.watch_latency_ms} ms a round trip",
            ratios["service_vs_floor_latency_time"], at_most=1.25))
    if steady:
        targets += [stats.target("steady-state wait (max - min) / poll interval",
                                 steady["max_minus_min_s"] / steady["poll_interval_s"],
                                 at_most=1.0),
                    stats.target("steady-state poll work / poll interval",
                                 steady["poll_work_s"] / steady["poll_interval_s"],
                                 at_most=0.05 if opts.watch_idle <= 1000 else 0.10),
                    stats.target("steady-state poll work / a minimal poller's",
                                 steady["poll_work_vs_minimal"], at_most=2.0),
                    stats.target("idle poll: round trips", steady["poll_no_block_round_trips"],
                                 at_most=2),
                    stats.target("idle poll with 2 price feeds: round trips more than without",
                                 steady["poll_no_block_feeds_round_trips"]
                                 - steady["poll_no_block_round_trips"], at_most=1),
                    stats.target("idle poll time / a minimal poller's",
                                 steady["poll_no_block_vs_minimal"], at_most=1.5),
                    stats.target("poll with a new block: round trips",
                                 steady["poll_new_block_round_trips"], at_most=3)]
    return {
        "scenario": "watcher", "backend": backend, "blocks": last - first + 1,
        "transfers": transfers, "watched": watched, "max_addresses": max_addresses,
        "payload_bytes": payload, "rounds": rounds, "inside": inside, "cpu_seconds": cpu,
        "median_seconds": median, "median_seconds_inside": median_inside,
        "blocks_per_second": rate, "blocks_per_second_wall": wall_rate, "rpc_calls": calls,
        "ratios": ratios, "steady_state": steady, "targets": targets, "failures": failures,
    }


def _steady_state(node, workdir, opts):
    from bench import seed

    poll, idle = opts.watch_poll_interval, opts.watch_idle
    db = str(workdir / "watch-steady.sqlite3")
    service.init_db(db)
    merchant = service.create_merchant(db)
    addresses = _addresses(opts.watch_samples, 2)
    process_ids = seed.seed_payments(db, merchant["merchantId"], node.url, node.token,
                                     node.head() + 1, addresses + _addresses(idle, 4),
                                     CONFIRMATIONS)[:len(addresses)]
    log = open(workdir / "watch-steady.log", "w")
    loop = subprocess.Popen(service.flask_command("watch-payments", "--poll-interval", str(poll),
                                                  "--max-addresses", str(opts.watch_max_addresses)),
                            cwd=ROOT, env=service.flask_env(db), stdout=log,
                            stderr=subprocess.STDOUT)
    latencies = []
    try:
        time.sleep(2 * poll)
        node.mine(1)  # the first poll with a block to scan reads the whole watched set: start-up
        while _scanned_block(db) < node.head():
            time.sleep(0.05)
        for i, (address, process_id) in enumerate(zip(addresses, process_ids, strict=True)):
            node.transfer(address, 10**6)
            time.sleep(poll * (0.37 * i % 1))  # land at varied points of the poll cycle
            node.mine(CONFIRMATIONS - 1)
            t0 = time.perf_counter()
            while not seed.has_event(db, process_id, "payment.completed"):
                if time.perf_counter() - t0 > 10 * poll:
                    raise RuntimeError(f"no payment.completed after {10 * poll}s")
                time.sleep(0.005)
            latencies.append(time.perf_counter() - t0)
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.wait(timeout=30)
        log.close()
    polls = _poll_work(node, db, opts)
    polls.update(_feed_polls(node, db, polls))
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)  # noqa: E731
    return {"poll_interval_s": poll, "watched": idle + len(addresses), "samples": len(latencies),
            "min_s": round(latencies[0], 3), "p50_s": pick(0.5), "p90_s": pick(0.9),
            "max_s": round(latencies[-1], 3),
            "max_minus_min_s": round(latencies[-1] - latencies[0], 3),
            "latencies_s": [round(x, 3) for x in latencies], "exit_code": loop.returncode, **polls}


def _feed_polls(node, db, polls, samples=10):
    """An idle poll of the same network once it has two price feeds (EUR/USD, GBP/USD, each a
    TestPriceFeed read in the poll's first batch): its round trips, calls and median seconds, beside
    the idle poll's without them (`polls`)."""
    from eth_abi import encode

    from app.chain.watcher import Watcher
    from app.config import DEFAULTS
    from app.db import open_database
    from app.domain import rates

    build = json.loads((CHAIN_DIR / "token" / "TestPriceFeed.json").read_text())
    chain_time = lambda: int(node.rpc("eth_getBlockByNumber", "latest", False)["timestamp"], 16)  # noqa: E731
    database = open_database(db, DEFAULTS)
    for pair, answer in (("EUR/USD", 108_420_000), ("GBP/USD", 127_000_000)):
        args = encode(["uint8", "string", "int256"], [8, pair.replace("/", " / "), answer]).hex()
        tx = node.rpc("eth_sendTransaction", {"from": node.accounts[0],
                                              "data": build["bytecode"] + args})
        feed = node.rpc("eth_getTransactionReceipt", tx)["contractAddress"]
        rates.add_feed(database, pair, network_id="bench", feed=feed, now=chain_time())
    watcher = Watcher(database, clock=chain_time)  # the node's blocks run ahead of the wall clock
    watcher.poll_network("bench")
    client = next(iter(watcher._clients.values()))
    posts = _count_posts(client.session)
    calls, trips, wall = [], [], []
    try:
        for _ in range(samples):
            calls_before, posts_before = sum(client.calls.values()), posts[0]
            started = time.perf_counter()
            watcher.poll_network("bench")
            wall.append(time.perf_counter() - started)
            calls.append(sum(client.calls.values()) - calls_before)
            trips.append(posts[0] - posts_before)
    finally:
        watcher.close()
        database.close_all()
    seconds = sorted(wall)[samples // 2]
    return {"poll_no_block_feeds_rpc_calls": max(calls),
            "poll_no_block_feeds_round_trips": max(trips),
            "poll_no_block_feeds_s": round(seconds, 4),
            "poll_no_block_feeds_vs_no_feeds": round(seconds / polls["poll_no_block_s"], 2)}


def _minimal_poll(session, url, token, database, scanned):
    """A minimal poller's poll: the head, the token's Transfer logs of the blocks after `scanned`,
    its own scan position written (a row of its own, not the watcher's), one commit. Returns the
    head."""
    head = int(_post(session, url, "eth_blockNumber"), 16)
    if head > scanned:
        _get_logs(session, url, token, scanned + 1, head, None)
    with database.transaction() as conn:
        conn.execute("INSERT INTO bench_minimal_poller (id, scanned_block) VALUES (1, ?)"
                     " ON CONFLICT (id) DO UPDATE SET scanned_block = excluded.scanned_block",
                     (head,))
    return head


def _poll_work(node, db, opts, samples=10):
    """The poll's own work, timed in this process on the steady-state database: the median wall
    and CPU seconds of a poll that finds one new block (no transfer in it), and of one that finds
    none; beside each, alternated with it, a minimal poller's (`_minimal_poll`)."""
    from app.chain.watcher import Watcher
    from app.config import DEFAULTS
    from app.db import open_database

    database = open_database(db, DEFAULTS)
    watcher = Watcher(database, clock=time.time, max_addresses=opts.watch_max_addresses)
    watcher.poll_network("bench")  # a restart: whatever it keeps in memory is read once
    client = next(iter(watcher._clients.values()))
    posts = _count_posts(client.session)
    session, scanned = requests.Session(), node.head()
    with database.transaction() as conn:  # the minimal poller's own scan position
        conn.execute("CREATE TABLE bench_minimal_poller (id INTEGER PRIMARY KEY,"
                     " scanned_block INTEGER)")
    figures = {}
    try:
        for name, mine in (("poll_new_block", 1), ("poll_no_block", 0)):
            timed = {"": ([], []), "minimal_": ([], [])}
            calls, trips = [], []  # the watcher's RPC calls (a batch's each) and HTTP requests
            for sample in range(samples):
                if mine:  # the same new block for both, each side first in turn
                    node.mine(mine)
                for side in (list(timed) if sample % 2 == 0 else list(timed)[::-1]):
                    wall, cpu = timed[side]
                    started, started_cpu = time.perf_counter(), time.process_time()
                    if side:
                        scanned = _minimal_poll(session, node.url, node.token, database, scanned)
                    else:
                        calls_before, posts_before = sum(client.calls.values()), posts[0]
                        watcher.poll_network("bench")
                        calls.append(sum(client.calls.values()) - calls_before)
                        trips.append(posts[0] - posts_before)
                    wall.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - started_cpu)
            for side, (wall, cpu) in timed.items():
                figures[f"{side}{name}_s"] = round(sorted(wall)[samples // 2], 4)
                figures[f"{side}{name}_cpu_s"] = round(sorted(cpu)[samples // 2], 4)
            figures[f"{name}_rpc_calls"] = max(calls)
            figures[f"{name}_round_trips"] = max(trips)
    finally:
        watcher.close()
        database.close_all()
    figures["poll_work_s"] = figures["poll_new_block_s"]
    figures["poll_work_vs_minimal"] = round(figures["poll_new_block_s"]
                                            / figures["minimal_poll_new_block_s"], 2)
    figures["poll_no_block_vs_minimal"] = round(figures["poll_no_block_s"]
                                                / figures["minimal_poll_no_block_s"], 2)
    polls_a_day = 86_400 / 5  # at P = 5 s
    figures["calls_per_day_at_5s_idle"] = round(figures["poll_no_block_rpc_calls"] * polls_a_day)
    figures["calls_per_day_at_5s_new_block_each_poll"] = round(
        figures["poll_new_block_rpc_calls"] * polls_a_day)
    return figures


def _latency_proxy(url, seconds):
    """tests/support/fake_rpc.py's proxy in front of the node, adding `seconds` to every round
    trip, as a provider across a network does."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.fake_rpc import FaultyRpc

    proxy = FaultyRpc(url, path="/")
    proxy.latency = seconds
    return proxy


def _point_at(db, url):
    """The seeded network's RPC URL set to `url` in the database copy `db`."""
    from app.config import DEFAULTS
    from app.db import open_database

    database = open_database(db, DEFAULTS)
    try:
        with database.transaction() as conn:
            conn.execute("UPDATE networks SET rpc_url = ? WHERE id = 'bench'", (url,))
    finally:
        database.close_all()


def _count_posts(session):
    """Count the HTTP requests made through `session` (one per JSON-RPC call or batch): [count]."""
    count, post = [0], session.post

    def counted(*args, **kwargs):
        count[0] += 1
        return post(*args, **kwargs)

    session.post = counted
    return count


def _scanned_block(db):
    from app.config import DEFAULTS
    from app.db import open_database

    database = open_database(db, DEFAULTS)
    try:
        return database.connection().execute(
            "SELECT scanned_block FROM networks WHERE id = 'bench'").fetchone()[0]
    finally:
        database.close_all()


if __name__ == "__main__" and sys.argv[1:2] == ["floor"]:
    floor_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
               int(sys.argv[7]))
if __name__ == "__main__" and sys.argv[1:2] == ["durable-floor"]:
    durable_floor_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                       int(sys.argv[7]), int(sys.argv[8]), sys.argv[9] == "many")
