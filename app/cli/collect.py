"""The payout mode's operator commands: `merchants set-payout`, `networks deploy-factory` and
`set-factory`, `collect`, `collections list` (the service side: app/domain/payouts.py,
app/chain/collect.py).

Key files are read by the commands that send (deploy-factory, collect) and never printed.
"""
import json
import threading
from collections import defaultdict

import click
from flask.cli import AppGroup, with_appcontext

from app.chain import collect as collector
from app.cli.chain import networks
from app.cli.common import fail, stop_on_signals, table, when
from app.cli.merchants import merchants
from app.clock import now
from app.core.money import format_units
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN
from app.db import get_db
from app.domain import payouts
from app.domain.setup import SetupError
from app.evm.signer import ChainError, SignerError

collections = AppGroup("collections", help="Transactions that moved deposits to payout addresses.")


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except (SetupError, SignerError, ChainError) as e:
        raise fail(e) from None


@merchants.command("set-payout")
@click.argument("merchant_id")
@click.argument("address")
@click.option("--unchecked", is_flag=True,
              help="Take an address without an EIP-55 checksum (all lower or all upper case),"
                   " checked character by character: a typo in it cannot be caught.")
def set_payout(merchant_id, address, unchecked):
    """Set the wallet address (EOA or smart account, the same on every network) that this
    merchant's payout-mode deposit addresses pay; processes confirmed from now on use it.
    Copy it from the wallet: mixed case, its EIP-55 checksum, catches a typo."""
    try:
        address, previous = payouts.set_payout(get_db(), merchant_id, address, now(),
                                               unchecked=unchecked)
    except payouts.UncheckedAddress as e:
        raise fail(f"{e} Copy the address from the wallet, which shows it with its checksum (in"
                   " mixed case); or, after checking this one character by character, run again"
                   " with --unchecked.") from None
    except SetupError as e:
        raise fail(e) from None
    click.echo(f"Payout address of {merchant_id} set to {address}. New payments' deposit addresses"
               " forward to it" + (f"; those already handed out keep forwarding to {previous}."
                                   if previous and previous != address else "."))


@networks.command("deploy-factory")
@click.argument("network_id")
@click.option("--key-file", required=True, type=click.Path(dir_okay=False),
              help="A file holding one hex private key of an account with the network's gas coin;"
                   " used for this transaction only, never stored.")
def deploy_factory(network_id, key_file):
    """Deploy the forwarder factory of the payout mode on a network, and use it."""
    factory, tx_hash, gas_used = _run(payouts.deploy_factory, network_id, key_file, now())
    click.echo(f"Deployed the forwarder factory of network {network_id} at {factory} (transaction"
               f" {tx_hash}, {gas_used} gas).")


@networks.command("set-factory")
@click.argument("network_id")
@click.argument("address")
def set_factory(network_id, address):
    """Use the forwarder factory already deployed at ADDRESS (its code is checked)."""
    factory = _run(payouts.set_factory, network_id, address, now())
    click.echo(f"Network {network_id} uses the forwarder factory at {factory}.")


# --- collect ---------------------------------------------------------------------------------

@click.command("collect")
@click.argument("network_id")
@click.option("--key-file", required=True, type=click.Path(dir_okay=False),
              help="A file holding one hex private key of the account that pays the gas (it needs"
                   " only the gas coin, and cannot redirect anything).")
@click.option("--merchant", "merchant_id", default=None, help="Only this merchant's addresses.")
@click.option("--dry-run", is_flag=True, help="Read and estimate; send nothing.")
@click.option("--max-batch", default=collector.MAX_BATCH, show_default=True,
              type=click.IntRange(1, 10_000), help="Deposit addresses per transaction at most.")
@click.option("--token", "extra_tokens", multiple=True,
              help="Also move this ERC-20 contract's balance (a token that is no asset here,"
                   " sent by mistake); repeatable.")
@click.option("--receipt-timeout", default=120, show_default=True, type=click.IntRange(1, 3600),
              help="Seconds to wait for each transaction's receipt.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@with_appcontext
def collect(network_id, key_file, merchant_id, dry_run, max_batch, extra_tokens, receipt_timeout,
            as_json):
    """Move what payout-mode deposit addresses hold on a network to their payout addresses."""
    checked = []
    for token in extra_tokens:
        checked.append(_run(lambda db, t: payouts.check_address(t, "A --token"), token))
    stop = threading.Event()  # a signal: the transaction in flight is awaited, no other is sent
    with stop_on_signals(stop.set):
        report = _run(collector.collect, network_id, key_file, merchant_id=merchant_id,
                      dry_run=dry_run, max_batch=max_batch, extra_tokens=checked, now=now(),
                      receipt_timeout=receipt_timeout, stopping=stop.is_set)
    summary = _summary(report)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        _print_summary(summary)
    if report.error:
        raise fail(report.error)


def _units(db, network_id):
    """token -> (symbol, decimals) for the network's assets and its gas coin."""
    units = {GAS_COIN: ("gas coin", 18)}
    for a in payment_rows.list_assets(db.connection()):
        if a.network_id == network_id:
            units[a.contract] = (a.symbol, a.decimals)
    return units


def _summary(report) -> dict:
    units = _units(get_db(), report.network_id)
    moved = defaultdict(lambda: {"amount": 0, "addresses": set(), "transactions": set()})
    payouts_of = defaultdict(set)
    transactions = []

    def add(items, tx_hash):
        for i in items:
            entry = moved[(i.merchant_id, i.token)]
            entry["amount"] += i.amount
            entry["addresses"].add(i.address)
            if tx_hash:
                entry["transactions"].add(tx_hash)
            payouts_of[i.merchant_id].add(i.payout_address)

    for collection, items, first in report.settled:
        if first:  # what an earlier run sent and never saw mined
            add(items, collection.tx_hash)
        transactions.append(_tx_json(collection, len({i.address for i in items}), report,
                                     earlier=True))
    for batch in report.batches:
        if report.dry_run:
            add([payout_rows.Item(0, d.address, token, d.process_id, d.merchant_id,
                                  d.payout_address, amount)
                 for d in batch.deposits for token, amount in batch.balances[d.address].items()
                 if amount], None)
            transactions.append({"txHash": None, "status": "planned",
                                 "addresses": len(batch.deposits), "gasEstimated": batch.gas,
                                 "maxFeePerGas": str(report.max_fee_per_gas)})
        elif batch.collection is not None:
            if batch.collection.status != "reverted":
                add(batch.moved, batch.collection.tx_hash)
            transactions.append(_tx_json(batch.collection, len(batch.deposits), report,
                                         earlier=False))
    merchants_json = []
    for merchant_id in sorted(payouts_of):
        tokens = []
        for (mid, token), entry in sorted(moved.items()):
            if mid != merchant_id:
                continue
            symbol, decimals = units.get(token, (None, None))
            tokens.append({
                "token": token, "symbol": symbol,
                "amount": format_units(entry["amount"], decimals) if decimals is not None else None,
                "baseUnits": str(entry["amount"]), "addresses": sorted(entry["addresses"]),
                "transactions": sorted(entry["transactions"]),
            })
        merchants_json.append({"merchantId": merchant_id,
                               "payoutAddresses": sorted(payouts_of[merchant_id]),
                               "tokens": tokens})
    return {"networkId": report.network_id, "sender": report.sender, "dryRun": report.dry_run,
            "merchants": merchants_json, "transactions": transactions,
            "replaced": [{"txHash": old, "replacement": new, "why": why}
                         for old, new, why in report.replaced],
            "gasUsed": sum(t.get("gasUsed") or 0 for t in transactions),
            "leftOut": sorted(report.held), "error": report.error}


def _confirmations(c, report):
    """How deep the collection's block is at the run's head (None: not mined)."""
    if c.block_number is None or report.head is None:
        return None
    return max(0, report.head - c.block_number + 1)


def _tx_json(c, addresses, report, *, earlier):
    return {"txHash": c.tx_hash, "status": c.status, "nonce": c.nonce, "addresses": addresses,
            "blockNumber": c.block_number, "confirmations": _confirmations(c, report),
            "confirmationsNeeded": report.confirmations, "finality": report.finality,
            "gasUsed": c.gas_used,
            "fee": str(c.gas_used * c.gas_price) if c.gas_used is not None else None,
            "earlierRun": earlier, "error": c.error, "note": c.note}


def _state(t):
    """How a transaction of the summary stands, for people."""
    if t["status"] != "pending":
        return t["status"]
    if t["blockNumber"] is None:
        return "pending (not yet mined)"
    if t["finality"] != "confirmations":
        return (f"pending (mined in block {t['blockNumber']}, until the {t['finality']} block"
                " passes it)")
    return (f"pending (mined in block {t['blockNumber']}, {t['confirmations']} of"
            f" {t['confirmationsNeeded']} confirmations)")


def _print_summary(s):
    verb = "Would move" if s["dryRun"] else "Moved"
    if not s["merchants"] and not s["transactions"] and not s["replaced"]:
        click.echo(f"Nothing to collect on {s['networkId']}.")
    if s["leftOut"]:
        click.echo(f"Left out {len(s['leftOut'])} address(es) held by a collection not confirmed"
                   " yet (another run's, or an earlier one's): a run after it is confirmed or"
                   " reverted collects what they hold then.")
    for m in s["merchants"]:
        for t in m["tokens"]:
            amount = (f"{t['amount']} {t['symbol']}" if t["symbol"]
                      else f"{t['baseUnits']} base units of {t['token']}")
            click.echo(f"{verb} {amount} of {m['merchantId']} to {', '.join(m['payoutAddresses'])}"
                       f" from {len(t['addresses'])} address(es)"
                       + (f" in {', '.join(t['transactions'])}" if t["transactions"] else "") + ".")
    for r in s["replaced"]:
        click.echo(f"Transaction {r['txHash']} was {r['why']}: replaced by {r['replacement']}.")
    for t in s["transactions"]:
        if t["txHash"] is None:
            click.echo(f"Planned transaction: {t['addresses']} address(es),"
                       f" about {t['gasEstimated']} gas at up to {t['maxFeePerGas']} wei per gas.")
        else:
            click.echo(f"Transaction {t['txHash']} (nonce {t['nonce']}"
                       + (", from an earlier run" if t["earlierRun"] else "") + f"): {_state(t)}"
                       + (f", {t['addresses']} address(es), {t['gasUsed']} gas"
                          if t["gasUsed"] is not None else "")
                       + (f" ({t['error']})" if t["error"] else "")
                       + (f"; note: {t['note']}" if t["note"] else "") + ".")
    if not s["dryRun"] and s["transactions"]:
        click.echo(f"Gas used: {s['gasUsed']}.")


# --- collections list ----------------------------------------------------------------------

@collections.command("list")
@click.option("--network", "network_id", default=None, help="Only this network's.")
@click.option("--merchant", "merchant_id", default=None,
              help="Only those moving this merchant's funds.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON array: one object per collection and token it moved.")
def collections_list(network_id, merchant_id, limit, as_json):
    """List collections, newest first, with their state: pending (not yet mined, or not yet
    confirmations deep), confirmed (counts), reverted (moved nothing)."""
    db = get_db()
    conn = db.connection()
    rows = payout_rows.list_collections(conn, network_id=network_id, merchant_id=merchant_id,
                                        limit=limit)
    items = {c: [i for i in found if i.amount]  # 0: a browser wallet's claim, not yet mined
             for c, found in payout_rows.items_of(conn, [c.id for c in rows]).items()}
    units = {}
    for c in rows:
        if c.network_id not in units:
            units[c.network_id] = _units(db, c.network_id)
    if as_json:
        click.echo(json.dumps([entry for c in rows for entry in _collection_json(
            c, items.get(c.id, []), units[c.network_id], merchant_id)]))
        return
    table([(c.id, c.network_id, c.tx_hash, c.status,
             len({i.address for i in items.get(c.id, []) if merchant_id in (None, i.merchant_id)}),
             _amounts(items.get(c.id, []), units[c.network_id], merchant_id),
             c.gas_used if c.gas_used is not None else "-", when(c.created_at)) for c in rows],
          ("ID", "NETWORK", "TRANSACTION", "STATE", "ADDRESSES", "AMOUNTS", "GAS", "CREATED"))


def _amount(token, amount, units):
    symbol, decimals = units.get(token, (None, None))
    return (f"{format_units(amount, decimals)} {symbol}" if decimals is not None
            else f"{amount} of {token}")


def _amounts(items, units, merchant_id):
    totals = defaultdict(int)
    for i in items:
        if merchant_id in (None, i.merchant_id):
            totals[i.token] += i.amount
    return ", ".join(_amount(t, a, units) for t, a in sorted(totals.items())) or "-"


def _collection_json(c, items, units, merchant_id) -> list:
    """A collection as `collections list --json` shows it: one object per token it moved (one with
    `token` null when it moved nothing), amounts in token units."""
    by_token = defaultdict(list)
    for i in items:
        if merchant_id in (None, i.merchant_id):
            by_token[i.token].append(i)
    common = {
        "collectionId": c.id, "networkId": c.network_id, "chainId": c.chain_id,
        "txHash": c.tx_hash, "state": c.status, "blockNumber": c.block_number,
        "sender": c.sender, "nonce": c.nonce, "factory": c.factory, "gasUsed": c.gas_used,
        "gasPrice": None if c.gas_price is None else str(c.gas_price), "error": c.error,
        "note": c.note, "createdAt": when(c.created_at),
        "settledAt": when(c.settled_at) if c.settled_at else None,
    }
    if not by_token:
        return [{**common, "token": None, "symbol": None, "amount": None, "baseUnits": None,
                 "addresses": [], "merchantIds": []}]
    found = []
    for token, moved in sorted(by_token.items()):
        total = sum(i.amount for i in moved)
        symbol, decimals = units.get(token, (None, None))
        found.append({**common, "token": token, "symbol": symbol,
                      "amount": format_units(total, decimals) if decimals is not None else None,
                      "baseUnits": str(total), "addresses": sorted({i.address for i in moved}),
                      "merchantIds": sorted({i.merchant_id for i in moved})})
    return found
