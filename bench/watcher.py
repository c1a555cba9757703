"""Chain watcher scenario, against a real Hardhat node on loopback (tests/chain, `npm ci` first):

1. catch-up: 10,000 blocks holding 1,000 token transfers to 1,000 pending deposit addresses (one each);
   `flask --app app watch-payments --once` from a fresh copy of the seeded database (service), and
   the floor: a plain loop (`python -m bench.watcher floor`) making the same eth_getLogs calls
   (same ranges, same address chunks) to the same node with a requests.Session, parsing the JSON and
   nothing else. Rounds alternate floor / service. Rate = blocks / seconds from the first RPC call
   to the end of the pass (measured inside each process: the watcher's summary line, the loop's
   own clock); the wall-clock rate from process start to exit (start-up included, as under cron:
   importing the app costs the service ~0.5 s more than `requests` costs the loop) is reported
   beside it. The service must record every transfer once and complete every process (1,000
   `payment.completed`).
2. steady state: `watch-payments` looping with --poll-interval P; K times, a transfer is sent, then
   the blocks that give it its confirmations are mined at once (t0); latency = when its
   `payment.completed` event is in the database (read every 5 ms) - t0. Target: max ≤ P. Polls
   start every P, so the wait for the next poll is at most P; the event is then written by that
   poll's work (head, reorganisation check, step, commit), which min (≈ that work alone) shows, and
   max - min (the wait alone) should stay under P.
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
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
            raise RuntimeError("Node.js and tests/chain's npm packages are needed (make test installs them)")
        subprocess.run(["node", "compile.js"], cwd=CHAIN_DIR, check=True, timeout=300)
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
                    raise RuntimeError("hardhat node did not start")
                time.sleep(0.1)
        self.accounts = self.rpc("eth_accounts")
        build = json.loads((CHAIN_DIR / "build" / "TestUSD.json").read_text())
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
        self.rpc("hardhat_mine", hex(blocks))

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


def _addresses(n, salt):
    return ["0x" + format(salt * 10**6 + i + 1, "040x") for i in range(n)]


TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def topic_of(address):
    return "0x" + "0" * 24 + address[2:].lower()


def floor_main(url, token, first, last, addresses_file):
    """The floor: the same eth_getLogs calls as the watcher makes, parsed, nothing else."""
    recipients = sorted(Path(addresses_file).read_text().split())
    started = time.perf_counter()
    session, calls, logs = requests.Session(), 0, 0
    for start in range(first, last + 1, MAX_RANGE):
        end = min(last, start + MAX_RANGE - 1)
        for i in range(0, len(recipients), MAX_ADDRESSES):
            chunk = recipients[i:i + MAX_ADDRESSES]
            body = session.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs",
                                           "params": [{"fromBlock": hex(start), "toBlock": hex(end),
                                                       "address": [token],
                                                       "topics": [TRANSFER_TOPIC, None,
                                                                  [topic_of(a) for a in chunk]]}]},
                                timeout=(5, 20)).json()
            calls += 1
            logs += len(body["result"])
    print(json.dumps({"calls": calls, "logs": logs, "seconds": time.perf_counter() - started}))


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


def run(opts, workdir):
    from bench import seed

    blocks, transfers = opts.watch_blocks, opts.watch_transfers
    node = Node(workdir / "hardhat.log")
    failures = []
    try:
        # The chain: `transfers` transfers spread evenly over `blocks` blocks, then the confirmations.
        first = node.head() + 1
        addresses = _addresses(transfers, 1)
        gap = blocks // transfers
        for address in addresses:
            node.transfer(address, 10**6)
            node.mine(gap - 1)
        node.mine(CONFIRMATIONS)
        last = node.head()
        template = workdir / "watch-template.sqlite3"
        service.init_db(template)
        merchant = service.create_merchant(template)
        process_ids = seed.seed_payments(template, merchant["merchantId"], node.url, node.token,
                                         first, addresses, CONFIRMATIONS)
        (workdir / "addresses.txt").write_text("\n".join(addresses))
        rounds = {"floor": [], "service": []}  # wall seconds, process start to exit
        inside = {"floor": [], "service": []}  # seconds from the first RPC call to the last commit
        cpu = {"floor": [], "service": []}  # CPU seconds of the process, start-up included
        calls = {}
        for round_no in range(opts.watch_rounds):
            for side in (("floor", "service") if round_no % 2 == 0 else ("service", "floor")):
                if side == "floor":
                    seconds, cpu_seconds, done = _timed([sys.executable, "-m", "bench.watcher", "floor", node.url,
                                            node.token, str(first), str(last),
                                            str(workdir / "addresses.txt")], dict(os.environ))
                    calls["floor"] = json.loads(done.stdout)
                    inside["floor"].append(calls["floor"]["seconds"])
                else:
                    db = workdir / f"watch-{round_no}.sqlite3"
                    shutil.copy(template, db)
                    seconds, cpu_seconds, done = _timed(service.flask_command(
                        "watch-payments", "--once", "--max-range", str(MAX_RANGE),
                        "--max-addresses", str(MAX_ADDRESSES)), service.flask_env(db))
                    summary = next(line.split("watch: ", 1)[1] for line in
                                   done.stderr.splitlines() if "RPC calls" in line)
                    calls["service"] = summary.split(", ", 1)[1]
                    inside["service"].append(float(summary.split()[3]))
                    counts = seed.watch_outcome(db, process_ids)
                    # Deep enough when first seen: no payment.pending, one payment.completed each.
                    if counts != {"transfers": transfers, "payment.completed": transfers}:
                        failures.append(f"round {round_no}: {counts}")
                rounds[side].append(seconds)
                cpu[side].append(round(cpu_seconds, 3))
        median = {side: stats.median_of([{"s": s} for s in v], "s") for side, v in rounds.items()}
        median_inside = {side: stats.median_of([{"s": s} for s in v], "s")
                         for side, v in inside.items()}
        rate = {side: (last - first + 1) / median_inside[side] for side in median_inside}
        wall_rate = {side: (last - first + 1) / median[side] for side in median}
        steady = _steady_state(node, workdir, merchant, opts)
    finally:
        node.close()
    ratio = stats.ratio(rate["service"], rate["floor"])
    return {
        "scenario": "watcher", "blocks": last - first + 1, "transfers": transfers,
        "rounds": rounds, "inside": inside, "cpu_seconds": cpu, "median_seconds": median,
        "median_seconds_inside": median_inside, "blocks_per_second": rate,
        "blocks_per_second_wall": wall_rate, "rpc_calls": calls,
        "ratios": {"service_vs_floor": ratio,
                   "service_vs_floor_wall": stats.ratio(wall_rate["service"], wall_rate["floor"])},
        "steady_state": steady,
        "targets": [stats.target("watcher catch-up / floor", ratio, at_least=0.80),
                    stats.target("steady-state max latency / poll interval",
                                 steady["max_s"] / steady["poll_interval_s"], at_most=1.0)],
        "failures": failures,
    }


def _steady_state(node, workdir, merchant, opts):
    from bench import seed

    poll = opts.watch_poll_interval
    db = workdir / "watch-steady.sqlite3"
    service.init_db(db)
    merchant = service.create_merchant(db)
    addresses = _addresses(opts.watch_samples, 2)
    process_ids = seed.seed_payments(db, merchant["merchantId"], node.url, node.token,
                                     node.head() + 1, addresses, CONFIRMATIONS)
    log = open(workdir / "watch-steady.log", "w")
    loop = subprocess.Popen(service.flask_command("watch-payments", "--poll-interval", str(poll)),
                            cwd=ROOT, env=service.flask_env(db), stdout=log, stderr=subprocess.STDOUT)
    latencies = []
    try:
        time.sleep(2 * poll)
        for i, (address, process_id) in enumerate(zip(addresses, process_ids)):
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
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)  # noqa: E731
    return {"poll_interval_s": poll, "samples": len(latencies), "min_s": round(latencies[0], 3),
            "p50_s": pick(0.5), "p90_s": pick(0.9), "max_s": round(latencies[-1], 3),
            "max_minus_min_s": round(latencies[-1] - latencies[0], 3),
            "latencies_s": [round(x, 3) for x in latencies], "exit_code": loop.returncode}


if __name__ == "__main__" and sys.argv[1:2] == ["floor"]:
    floor_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
