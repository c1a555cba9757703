"""The time to collect N payout-mode deposit addresses end to end (default 1,000), on one Hardhat
node.

Set up as an operator and customers would, untimed: `networks add`, `assets add`,
`networks deploy-factory`, two merchants with `merchants set-payout`, N processes confirmed through
the service (each its CREATE2 deposit address), each address paid the token by a dev account (and
one in ten the gas coin too, as customers sometimes do by mistake). Then timed, each as the
operator runs it (`flask --app app collect NETWORK --key-file K --json`, a fresh process):
- `collect --dry-run`: reads every balance and estimates the batches; sends nothing;
- `collect`: the same, then signs, sends and awaits each batch's receipt and records it;
- `collect` again: nothing left; the cost of reading N addresses that hold nothing.
Checked after: every address empty, each payout wallet holding exactly its merchant's payments.

Hardhat mines each transaction at once (automine), so the time is the service's and the node's
work, not block times: on a real network add about one block time per transaction.

`python -m bench.collect_e2e [--addresses 1000] [--json]`
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app import create_app
from app.db import get_db, init_db
from app.domain import merchants as merchant_service
from app.domain import payments, payouts, processes
from app.domain.setup import add_asset, add_network
from bench.watcher import Node

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Hardhat's published dev key of account #2 ("test test … junk"): a local node's, never a real one.
KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
PAYOUTS = ("0x1111111111111111111111111111111111111111",
           "0x2222222222222222222222222222222222222222")
AMOUNT = 25 * 10**6  # base units (25 TUSD) at each address
GAS_COIN_EVERY = 10
ETHER = 10**18


def setup(node, database, key_file, n):
    app = create_app({"DATABASE": database})
    with app.app_context():
        init_db()
        db = get_db()
        add_network(db, network_id="local", name="Hardhat", chain_id=31337, rpc_url=node.url,
                             confirmations=1, start_block=None, now=time.time())
        add_asset(db, asset_id="tusd", network_id="local", symbol="TUSD", name="Test USD",
                           contract=node.token, decimals=6, now=time.time())
        payouts.deploy_factory(db, "local", key_file, time.time())
        deposits = {}
        for payout in PAYOUTS:
            merchant, _ = merchant_service.create(db, name="Bench", livemode=False,
                                                  webhook_url=None, now=time.time())
            payouts.set_payout(db, merchant.id, payout, time.time())
            for _ in range(n // len(PAYOUTS)):
                body, _ = processes.create_preorder(db, merchant, amount="25", metadata="{}",
                                                    now=time.time(), ttl=3600)
                process_id = json.loads(body)["processId"]
                _, view = payments.confirm(db, merchant, process_id, asset_id="tusd",
                                           network_id="local", now=time.time())
                deposits[view.payment.address] = payout
    app.extensions["db"].close_all()
    for i, address in enumerate(deposits):
        node.transfer(address.lower(), AMOUNT)
        if i % GAS_COIN_EVERY == 0:
            node.rpc("eth_sendTransaction", {"from": node.accounts[1], "to": address,
                                             "value": hex(ETHER // 100)})
    return deposits


def timed_collect(database, key_file, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}
    env["FLASK_DATABASE"] = database
    started = time.monotonic()
    done = subprocess.run([str(BIN / "flask"), "--app", "app", "collect", "local",
                           "--key-file", key_file, "--json", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"collect {' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def token_balance(node, holder):
    data = "0x70a08231" + holder[2:].lower().rjust(64, "0")
    return int(node.rpc("eth_call", {"to": node.token, "data": data}, "latest"), 16)


def run(n, workdir):
    node = Node(Path(workdir) / "hardhat.log")
    try:
        key_file = Path(workdir) / "operator.key"
        key_file.write_text(KEY)
        database = str(Path(workdir) / "bench.sqlite3")
        deposits = setup(node, database, str(key_file), n)
        dry_seconds, dry = timed_collect(database, str(key_file), "--dry-run")
        seconds, report = timed_collect(database, str(key_file))
        again_seconds, again = timed_collect(database, str(key_file))
        if any(token_balance(node, a) for a in deposits):
            raise RuntimeError("an address still holds tokens after collect")
        for payout in PAYOUTS:
            expected = AMOUNT * sum(1 for p in deposits.values() if p == payout)
            if token_balance(node, payout) != expected:
                raise RuntimeError(f"payout {payout} holds {token_balance(node, payout)},"
                                   f" not {expected}")
        if again["transactions"]:
            raise RuntimeError("a second collect found something to move")
        txs = report["transactions"]
        return {
            "scenario": "collect-e2e", "addresses": len(deposits),
            "dry_run_seconds": round(dry_seconds, 2),
            "planned_transactions": len(dry["transactions"]),
            "collect_seconds": round(seconds, 2), "transactions": len(txs),
            "addresses_per_transaction": [t["addresses"] for t in txs],
            "gas_used": report["gasUsed"],
            "gas_per_address": round(report["gasUsed"] / len(deposits)),
            "nothing_left_seconds": round(again_seconds, 2),
        }
    finally:
        node.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.collect_e2e",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--addresses", type=int, default=1000,
                        help="deposit addresses (default 1000)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-collect-e2e-") as workdir:
        result = run(opts.addresses, workdir)
    if opts.json:
        print(json.dumps(result, indent=1))
    else:
        for name, value in result.items():
            print(f"{name:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
