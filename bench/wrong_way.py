"""Money that arrives the wrong way, and reconcile: what they cost, against real Hardhat nodes.

    python bench/wrong_way.py [--root CHECKOUT] [--watched 1000,100000] [--reconcile 100000]

`--root`: the checkout whose `app` runs (default: this one): run it once with an earlier checkout
(git worktree) and once with this one for the watcher's "before" and "after" on the same machine.

1. The watcher on two networks of one mode (chains 31337 and 80002, the test token at the same
   address on both). For each size in `--watched`: that many pending deposit addresses, half chosen
   on each network; on each chain `--blocks` blocks holding `--transfers` token transfers, half to
   addresses chosen on that network (payments), half to addresses chosen on the other (the right
   token on the wrong network: ignored before, recorded and reported as unexpected after).
   - catch-up: `watch-payments --once` over both, on a fresh copy of the seeded database: the
     pass's seconds (measured in the process, from its log line), the wall clock, its RPC calls;
   - polls (in this process, the watcher started and its watched sets read once): the median of
     10 idle polls (no new block) and of 10 polls that each find one new empty block, per network:
     seconds, RPC calls, HTTP round trips.
2. `reconcile` (run when --root has the command)
   over `--reconcile` transfers, each to its own deposit address, in blocks sprayed by
   tests/chain/token/OddToken.sol (thousands of Transfer logs a transaction), recorded as the
   watcher records them, each process completed: the command's wall clock, its own split
   (database snapshot, chain, comparison), and beside it the floor of the chain part (the same
   eth_getLogs calls, parsed, nothing else) and of the database part (one SELECT of the transfers).
Results: bench/results/wrong-way-<time>.json; figures in bench/README.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _root():
    """The checkout given by --root, put first on sys.path before anything imports `app`."""
    for i, arg in enumerate(sys.argv):
        if arg == "--root" and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1]).resolve()
        if arg.startswith("--root="):
            return Path(arg.split("=", 1)[1]).resolve()
    return HERE


ROOT = _root()
sys.path.insert(0, str(HERE))  # this checkout's harness (it imports no `app` at import time)

import requests  # noqa: E402

from bench.watcher import Node, _count_posts  # noqa: E402

sys.path.insert(0, str(ROOT))  # the checkout measured: every `app` import from here on

CONFIRMATIONS = 12
CHAIN_DIR = HERE / "tests" / "chain"
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def flask(db, *args, timeout=1800):
    env = dict(os.environ, FLASK_DATABASE=str(db), PYTHONPATH=str(ROOT))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flask", "--app", "app", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done, time.perf_counter() - started


def node(log_path, chain_id):
    os.environ["TEST_CHAIN_ID"] = str(chain_id)
    try:
        return Node(log_path)
    finally:
        os.environ.pop("TEST_CHAIN_ID", None)


def addresses(n, salt):
    return ["0x" + format(salt * 10**7 + i + 1, "040x") for i in range(n)]


def open_db(path):
    from app.config import DEFAULTS
    from app.db import open_database

    return open_database(str(path), dict(DEFAULTS, SQLITE_SYNCHRONOUS="OFF"))


def seed(db_path, merchant_id, networks, chosen):
    """Networks [(id, chain id, url, token, start block)] and one pending process per address,
    its payment chosen on `chosen[address]`."""
    from dataclasses import replace

    from app.core.records import Asset, Network, Payment, Process
    from app.data import payments as payment_rows
    from app.data import processes as process_rows

    now = int(time.time())
    db = open_db(db_path)
    try:
        with db.transaction() as conn:
            for network_id, chain_id, url, token, start in networks:
                payment_rows.insert_network(conn, Network(
                    id=network_id, name=network_id, chain_id=chain_id, rpc_url=url,
                    confirmations=CONFIRMATIONS, start_block=start, scanned_block=start - 1,
                    head_block=start - 1, disabled_at=None, created_at=now))
                payment_rows.insert_asset(conn, Asset(
                    id="tusd", network_id=network_id, symbol="TUSD", name="Test USD",
                    contract=token, decimals=6, disabled_at=None, created_at=now))
            tokens = {n[0]: n[3] for n in networks}
            chain_ids = {n[0]: n[1] for n in networks}
            base = Process(seq=None, id="", merchant_id=merchant_id, status="pending", amount="1",
                           metadata="{}", livemode=False, created_at=0, updated_at=0,
                           expires_at=now + 86_400)
            ids, made = [], now - 3600
            for i, (address, network_id) in enumerate(chosen.items()):
                process = replace(base, id=f"00000000-0000-4000-8000-{i:012d}", created_at=made,
                                  updated_at=made)
                process_rows.insert(conn, process, [])
                payment_rows.insert_payment(conn, Payment(
                    process_id=process.id, merchant_id=merchant_id, address_index=i,
                    address=address, asset_id="tusd", network_id=network_id,
                    chain_id=chain_ids[network_id], token_contract=tokens[network_id], decimals=6,
                    amount_due=10**6, created_at=made, updated_at=made))
                ids.append(process.id)
    finally:
        db.close_all()
    return ids


# --- 1. the watcher on two networks -----------------------------------------------------------

def new_database(path):
    """An initialised database of the measured checkout and a test-mode merchant's id."""
    for args in (("init-db",), ("merchants", "create", "--name", "bench", "--json")):
        done, _ = flask(path, *args)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout)["merchantId"]


def watcher_part(nodes, workdir, watched, blocks, transfers):
    alpha, beta = nodes
    chosen = {}
    for i, address in enumerate(addresses(watched, 1)):
        chosen[address] = "alpha" if i % 2 == 0 else "beta"
    by_network = {"alpha": [a for a, n in chosen.items() if n == "alpha"],
                  "beta": [a for a, n in chosen.items() if n == "beta"]}
    starts = {}
    for network_id, chain, other in (("alpha", alpha, "beta"), ("beta", beta, "alpha")):
        starts[network_id] = chain.head() + 1
        paying = by_network[network_id][:transfers // 2]
        wrong = by_network[other][transfers // 2:transfers // 2 + transfers - len(paying)]
        targets = [a for pair in zip(paying, wrong, strict=False) for a in pair]
        gap = max(1, blocks // max(1, len(targets)))
        for address in targets:
            chain.transfer(address, 10**6)
            chain.mine(gap - 1)
        chain.mine(CONFIRMATIONS)
    template = workdir / f"two-{watched}.sqlite3"
    seed(template, new_database(template),
         [("alpha", 31337, alpha.url, alpha.token, starts["alpha"]),
          ("beta", 80002, beta.url, beta.token, starts["beta"])], chosen)
    catch_up = []
    for _ in range(2):
        db = workdir / f"two-{watched}-copy.sqlite3"
        shutil.copy(template, db)
        done, wall = flask(db, "watch-payments", "--once")
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        line = next(x for x in done.stderr.splitlines() if "RPC calls" in x)
        summary = line.split("watch: ", 1)[1]
        catch_up.append({"pass_s": float(summary.split()[3]), "wall_s": round(wall, 3),
                         "calls": summary.split(", ", 1)[1]})
    polls = _polls(db, nodes)
    return {"watched": watched, "blocks_each": blocks, "transfers_each": transfers,
            "catch_up": catch_up,
            "catch_up_pass_s": statistics.median(c["pass_s"] for c in catch_up),
            **polls}


def _polls(db, nodes, samples=10):
    from app.chain.watcher import Watcher

    database = open_db(db)
    watcher = Watcher(database, clock=time.time)
    found = {}
    try:
        for network_id in ("alpha", "beta"):
            watcher.poll_network(network_id)  # a restart: the watched set read whole
        clients = {n: watcher._client(_network(database, n)) for n in ("alpha", "beta")}
        posts = {n: _count_posts(c.session) for n, c in clients.items()}
        for name, mine in (("idle", False), ("new_block", True)):
            for network_id, chain in zip(("alpha", "beta"), nodes, strict=True):
                client, times, calls, trips = clients[network_id], [], [], []
                for _ in range(samples):
                    if mine:
                        chain.mine(1)
                    before_calls, before_posts = sum(client.calls.values()), posts[network_id][0]
                    started = time.perf_counter()
                    watcher.poll_network(network_id)
                    times.append(time.perf_counter() - started)
                    calls.append(sum(client.calls.values()) - before_calls)
                    trips.append(posts[network_id][0] - before_posts)
                found[f"{name}_poll_{network_id}_s"] = round(statistics.median(times), 4)
                found[f"{name}_poll_{network_id}_calls"] = max(calls)
                found[f"{name}_poll_{network_id}_round_trips"] = max(trips)
    finally:
        watcher.close()
        database.close_all()
    return found


def _network(database, network_id):
    from app.data import payments as payment_rows

    return payment_rows.get_network(database.connection(), network_id)


# --- 2. reconcile ------------------------------------------------------------------------------

def reconcile_part(chain, workdir, count, per_tx=4000):
    build = json.loads((CHAIN_DIR / "token" / "OddToken.json").read_text())
    tx = chain.rpc("eth_sendTransaction", {"from": chain.accounts[0], "data": build["bytecode"]})
    odd = chain.rpc("eth_getTransactionReceipt", tx)["contractAddress"].lower()
    start = chain.head() + 1
    targets = addresses(count, 3)
    logs = []
    for i in range(0, count, per_tx):
        chunk = targets[i:i + per_tx]
        data = ("0x" + _selector("spray(address[],uint256)") + format(64, "064x")
                + format(10**6, "064x") + format(len(chunk), "064x")
                + "".join(a[2:].rjust(64, "0") for a in chunk))
        sent = chain.rpc("eth_sendTransaction", {"from": chain.accounts[0], "to": odd, "data": data,
                                                 "gas": hex(29_000_000)})
        receipt = chain.rpc("eth_getTransactionReceipt", sent)
        logs += receipt["logs"]
        chain.mine(50)  # a year's transfers are spread over blocks
    chain.mine(CONFIRMATIONS)
    db = workdir / "reconcile.sqlite3"
    ids = seed(db, new_database(db), [("bench", 31337, chain.url, odd, start)],
               {a: "bench" for a in targets})
    _record(db, ids, targets, logs, chain)
    done, wall = flask(db, "reconcile", "bench", "--json")
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    report = json.loads(done.stdout)
    problems = sum(len(report[k]) for k in ("recordedNotOnChain", "onChainNotRecorded",
                                            "unsupportedStates"))
    floor_chain = _chain_floor(chain, odd, targets, report["fromBlock"], report["toBlock"])
    floor_db = _db_floor(db)
    return {"transfers": count, "blocks": report["toBlock"] - report["fromBlock"] + 1,
            "wall_s": round(wall, 3), "split_s": report["seconds"], "checked": report["checked"],
            "findings": problems, "floor_chain_s": floor_chain, "floor_database_s": floor_db,
            "gas_coin_balances_s": _balances(chain, targets, report["toBlock"])}


def _balances(chain, targets, block, batch=500):
    """What reading the gas coin of every address costs (reconcile does it for payout-mode
    addresses; the watcher would have to on every poll to see the gas coin): eth_getBalance,
    500 to a batch."""
    session = requests.Session()
    started = time.perf_counter()
    for i in range(0, len(targets), batch):
        calls = [{"jsonrpc": "2.0", "id": j, "method": "eth_getBalance", "params": [a, hex(block)]}
                 for j, a in enumerate(targets[i:i + batch])]
        assert len(session.post(chain.url, json=calls, timeout=600).json()) == len(calls)
    return round(time.perf_counter() - started, 3)


def _selector(signature):
    from app.evm.addresses import keccak256

    return keccak256(signature.encode())[:4].hex()


def _record(db_path, ids, targets, logs, chain):
    """Each sprayed Transfer recorded as the watcher records a confirmed payment, and its process
    completed by it."""
    from app.core.records import Transfer
    from app.data import transfers as transfer_rows

    by_address = dict(zip(targets, ids, strict=True))
    stamps = {}
    db = open_db(db_path)
    try:
        with db.transaction() as conn:
            for raw in logs:
                to = "0x" + raw["topics"][2][-40:]
                number = int(raw["blockNumber"], 16)
                if number not in stamps:
                    stamps[number] = int(chain.rpc("eth_getBlockByNumber", hex(number),
                                                   False)["timestamp"], 16)
                transfer_rows.record(conn, Transfer(
                    chain_id=31337, tx_hash=raw["transactionHash"],
                    log_index=int(raw["logIndex"], 16), network_id="bench",
                    process_id=by_address[to], token_contract=raw["address"],
                    from_address="0x" + raw["topics"][1][-40:], amount=int(raw["data"], 16),
                    block_number=number, block_hash=raw["blockHash"],
                    block_timestamp=stamps[number],
                    status="confirmed", seen_at=stamps[number], confirmed_at=stamps[number]))
            conn.execute("UPDATE processes SET status = 'completed', completed_by = 'payment'")
            head = chain.head()
            conn.execute("UPDATE networks SET scanned_block = ?, head_block = ?", (head, head))
    finally:
        db.close_all()


def _chain_floor(chain, token, targets, first, last, chunk=500):
    """The same eth_getLogs calls as reconcile's (chunks of 500 addresses, 20 to a batch),
    parsed."""
    session = requests.Session()
    started = time.perf_counter()
    ordered = sorted(targets)
    chunks = [ordered[i:i + chunk] for i in range(0, len(ordered), chunk)]
    found = 0
    for i in range(0, len(chunks), 20):
        batch = [{"jsonrpc": "2.0", "id": j, "method": "eth_getLogs", "params": [{
            "fromBlock": hex(first), "toBlock": hex(last),
            "topics": [TRANSFER_TOPIC, None, ["0x" + a[2:].rjust(64, "0") for a in c]]}]}
            for j, c in enumerate(chunks[i:i + 20])]
        for item in session.post(chain.url, json=batch, timeout=600).json():
            found += len(item["result"])
    assert found == len(targets), found
    return round(time.perf_counter() - started, 3)


def _db_floor(db_path):
    database = open_db(db_path)
    try:
        started = time.perf_counter()
        rows = database.connection().execute("SELECT * FROM transfers").fetchall()
        assert rows
        return round(time.perf_counter() - started, 3)
    finally:
        database.close_all()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE))
    parser.add_argument("--watched", default="1000,100000")
    parser.add_argument("--blocks", type=int, default=2000, help="blocks of each chain's catch-up")
    parser.add_argument("--transfers", type=int, default=200, help="transfers in them, each chain")
    parser.add_argument("--reconcile", type=int, default=100_000, help="0: not run")
    opts = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-wrong-way-"))
    nodes = [node(workdir / "alpha.log", 31337), node(workdir / "beta.log", 80002)]
    results = {"root": str(ROOT), "git_commit": subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
        text=True).stdout.strip(),
        "load_before": os.getloadavg(), "watcher": []}
    try:
        for watched in (int(x) for x in opts.watched.split(",") if x):
            results["watcher"].append(watcher_part(nodes, workdir, watched, opts.blocks,
                                                   opts.transfers))
            print(json.dumps(results["watcher"][-1]), flush=True)
        if opts.reconcile and not (ROOT / "app/cli/reconcile.py").exists():
            print("reconcile: not run, --root has no reconcile command", flush=True)
        elif opts.reconcile:
            results["reconcile"] = reconcile_part(nodes[0], workdir, opts.reconcile)
            print(json.dumps(results["reconcile"]), flush=True)
    finally:
        for n in nodes:
            n.close()
    results["load_after"] = os.getloadavg()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = HERE / "bench" / "results" / f"wrong-way-{stamp}.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"results: {out}")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
