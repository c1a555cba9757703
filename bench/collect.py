"""Collection gas: the forwarder factory (app/evm/forwarder.py) against what a merchant pays
without it, measured side by side on one Hardhat node (tests/chain, `npm ci` first).

- baseline, per deposit address: an EOA holding the token and no gas coin; the merchant tops it up
  with the gas coin (a 21,000-gas transfer), then the address sends its whole token balance to the
  payout address (one ERC-20 `transfer`). Gas = the two receipts' gasUsed.
- factory, per deposit address: N CREATE2 deposit addresses holding the same token balance, emptied
  by one `collect` transaction (N = 10, then 100). Gas = that receipt's gasUsed / N.
Both sides use the same token (tests/chain's OpenZeppelin ERC-20) and amounts, and a payout address
that already holds some of it (as after its first collection). Gas is deterministic: one round.
Also reported, to say where the factory's gas goes: the same collection with no token listed and
empty addresses (CREATE2, the constructor's call for the token list, SELFDESTRUCT, calldata), and
the floor (CREATE2's 32,000 plus the baseline's transfer without its 21,000 intrinsic gas) /
baseline.

`python -m bench.collect [--batches 10,100] [--json]`, or `python -m bench.run --scenarios collect`.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

from eth_abi import encode

from app.evm import forwarder
from app.evm.addresses import keccak256, to_checksum_address
from bench import report, stats
from bench.watcher import Node

AMOUNT = 25 * 10**6  # 25 tokens of 6 decimals at each deposit address
TARGETS = {10: 0.95, 100: 0.85}


def _call(signature, types, values):
    return "0x" + (keccak256(signature.encode())[:4] + encode(types, values)).hex()


class Bench:
    def __init__(self, node):
        self.node = node
        self.payer = node.accounts[0]
        self.token = to_checksum_address(node.token)
        self.payout = to_checksum_address(node.accounts[1])
        self.chain_id = int(node.rpc("eth_chainId"), 16)

    def receipt(self, tx_hash):
        receipt = self.node.rpc("eth_getTransactionReceipt", tx_hash)
        if receipt["status"] != "0x1":
            raise RuntimeError(f"transaction {tx_hash} reverted")
        return receipt

    def send(self, to, data="0x", value=0, sender=None):
        return self.receipt(self.node.rpc("eth_sendTransaction", {
            "from": sender or self.payer, "to": to, "data": data, "value": hex(value)}))

    def give(self, to, amount=AMOUNT):
        self.send(self.token, _call("transfer(address,uint256)", ["address", "uint256"],
                                    [to, amount]))

    def gas(self, receipt):
        return int(receipt["gasUsed"], 16)

    def baseline(self, n):
        """Gas per address: top-up (the receipt's gasUsed) + the address's own token transfer
        out."""
        from eth_account import (
            Account,  # here: it sets the process's recursion limit to 100,000
        )

        keys = [Account.create() for _ in range(n)]
        for key in keys:
            self.give(key.address)
        fee = int(self.node.rpc("eth_gasPrice"), 16) * 2
        total = 0
        for key in keys:
            transfer = {"to": self.token, "value": 0, "gas": 100_000, "maxFeePerGas": fee,
                        "maxPriorityFeePerGas": 1, "nonce": 0, "chainId": self.chain_id,
                        "data": _call("transfer(address,uint256)", ["address", "uint256"],
                                      [self.payout, AMOUNT])}
            total += self.gas(self.send(key.address, value=100_000 * fee))
            signed = Account.sign_transaction(transfer, key.key)
            total += self.gas(self.receipt(self.node.rpc("eth_sendRawTransaction",
                                                         "0x" + signed.raw_transaction.hex())))
        return total / n, total

    def factory(self, factory, n, tag, tokens=True):
        """Gas per address of one collect over n funded deposit addresses (empty ones if not
        tokens)."""
        deposits = [(self.payout, forwarder.salt(f"bench-{tag}-{i}")) for i in range(n)]
        if tokens:
            for payout, salt in deposits:
                self.give(forwarder.deposit_address(factory, payout, salt))
        data = forwarder.collect_calldata([self.token] if tokens else [], deposits)
        before = self._balance(self.payout)
        gas = self.gas(self.send(factory, "0x" + data.hex()))
        if tokens and self._balance(self.payout) - before != n * AMOUNT:
            raise RuntimeError("the collection did not move every deposit's tokens to the payout")
        return gas / n, gas

    def _balance(self, holder):
        return int(self.node.rpc("eth_call", {"to": self.token, "data": _call(
            "balanceOf(address)", ["address"], [holder])}, "latest"), 16)


def run(opts, workdir):
    batches = getattr(opts, "collect_batches", None) or sorted(TARGETS)
    node = Node(Path(workdir) / "hardhat-collect.log")
    try:
        bench = Bench(node)
        bench.give(bench.payout, 10**6)  # the payout already holds the token
        factory = to_checksum_address(bench.receipt(node.rpc("eth_sendTransaction", {
            "from": bench.payer, "data": "0x" + forwarder.factory_creation_code().hex()}))[
                "contractAddress"])
        rows = []
        for n in batches:
            base, base_total = bench.baseline(n)
            per, total = bench.factory(factory, n, f"{n}")
            bare, _ = bench.factory(factory, n, f"{n}-bare", tokens=False)
            # the baseline's transfer without its intrinsic gas
            transfer_only = base - 21_000 - 21_000
            rows.append({"batch": n, "baseline_gas_per_address": base,
                         "factory_gas_per_address": per, "factory_tx_gas": total,
                         "no_token_gas_per_address": bare,
                         "ratio": round(per / base, 4),
                         "floor_ratio": round((32_000 + transfer_only) / base, 4)})
    finally:
        node.close()
    return {
        "scenario": "collect", "rows": rows,
        "targets": [stats.target(f"collect gas per address / baseline, {row['batch']} per batch",
                                 row["ratio"], at_most=TARGETS[row["batch"]])
                    for row in rows if row["batch"] in TARGETS],
        "failures": [],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.collect",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="10,100",
                        help="addresses per collect transaction (default 10,100)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON instead of a table")
    opts = parser.parse_args(argv)
    opts.collect_batches = [int(n) for n in opts.batches.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as workdir:
        result = run(opts, workdir)
    print(json.dumps(result, indent=1) if opts.json else "\n".join(report.collect_table(result)))
    return 1 if any(t["met"] is False for t in result["targets"]) else 0


if __name__ == "__main__":
    sys.exit(main())
