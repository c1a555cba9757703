"""The payouts page's chain work: the payout address's balance per network, and the collections a
merchant's browser wallet sends, recorded by their transaction hash and settled as `collect`'s own.

A browser wallet's collection is recorded when the page posts the hash its wallet answered: the
network's node must know the transaction, sent from any account to the network's forwarder factory
(anyone may send that call: it can only move deposits to their payout addresses) and naming some of
the merchant's deposit addresses, which it then holds as `collect`'s own collections do. It is
`pending` with no amounts until mined, and each time the payouts page reads that network it is
settled from its receipt by what `collect` uses for its own (app/chain/collection_records.py
record_receipt: what its own logs show moved, confirmed once `confirmations` deep and its block
proven on the kept chain, app/evm/canonical.py), or `reverted` when the node says its nonce went
to another transaction. A `collect` run on the network settles it too, as any pending collection
(it cannot broadcast it again: the wallet kept the signed transaction)."""
import re
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace

from app.chain import collect, collection_records, proofs
from app.core.money import format_units
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN, Collection, Item
from app.evm import canonical, forwarder, rpc
from app.evm.addresses import to_checksum_address

GAS_COIN_DECIMALS = 18  # every EVM chain's gas coin (ETH, POL, ...)
TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


class Refused(ValueError):
    """The hash cannot be recorded as a collection; str() says why."""


def balances(client, address, assets) -> list[tuple[str, str]]:
    """What `address` holds on the network: [(amount in token units, symbol)] for each token asset
    and the gas coin, read at one block (RpcError when the node does not answer)."""
    held = collect._balances(client, [SimpleNamespace(address=address)],
                             [a.contract for a in assets])[1][address]
    found = [(format_units(held[a.contract], a.decimals), a.symbol) for a in assets]
    return found + [(format_units(held[GAS_COIN], GAS_COIN_DECIMALS), "of the gas coin")]


@dataclass
class Waiting:
    """What one merchant's payout-mode deposit addresses hold on a network now, and the factory call
    that moves it to their payout addresses from any account (the console's payouts page, where the
    merchant's browser wallet sends it and pays the gas)."""
    factory: str
    deposits: list  # of Deposit: the ones holding something
    totals: dict  # token contract or GAS_COIN -> amount held, over `deposits`
    calldata: str | None  # 0x…: the call collecting the first `batch` of them; None when empty
    batch: int = 0


def offer(db, network, merchant_id, client, now, *, max_batch=100) -> tuple[Waiting, set[str]]:
    """What the merchant's deposit addresses hold on the network, and the factory call its browser
    wallet sends to collect them (at most `max_batch` addresses: a wallet estimates the gas without
    `collect`'s halving, so the batch stays well below a block); and the addresses left out, held
    by a collection (a `collect` run's, or an earlier wallet's: `payout_rows.held`). RpcError when
    the node cannot be read.

    The holds are read after the balances, so an address a run claimed meanwhile is left out;
    no lock is taken (a page view must not hold the writers): a run that claims after the page
    is built may still include its addresses, and the second transaction then moves nothing
    there."""
    conn = db.connection()
    factory, version = payout_rows.factory_of(conn, network.id)
    tokens = [a.contract for a in payment_rows.list_assets(conn) if a.network_id == network.id]
    deposits = payout_rows.collectable(conn, factory, version, merchant_id)
    read_block, balances = collect._balances(client, deposits, tokens) if deposits else (None, {})
    full = [d for d in deposits if any(balances[d.address].values())]
    held = payout_rows.held(db.connection(), network.id, [d.address for d in full], read_block,
                            now)
    full = [d for d in full if d.address not in held]
    if not full:
        return Waiting(factory=factory, deposits=[], totals={}, calldata=None), held
    totals = defaultdict(int)
    for d in full:
        for token, amount in balances[d.address].items():
            totals[token] += amount
    batch = collect._batch(full[:max_batch], balances, tokens)
    return Waiting(factory=factory, deposits=full, totals=dict(totals),
                   calldata="0x" + collect._calldata(batch).hex(), batch=len(batch.deposits)), held


def record(db, network, merchant_id, tx_hash, client, now) -> bool:
    """Record the browser wallet's collection `tx_hash` on `network` for the merchant: True when
    recorded now, False when it was already. Refused for a malformed hash, one the node does not
    know, a transaction to another contract than the network's factory, or a factory call that
    moves none of the merchant's deposit addresses (one merchant never records, and so never holds
    or hides, another's collection).

    The merchant's deposit addresses its call names are claimed at once, as a `collect` run
    claims its own before it sends (items of amount 0 until its receipt shows what it moved): a
    run started while the wallet's transaction waits to be mined leaves them out and spends no gas
    there. Another merchant's addresses in a hand-made call are not held: a transaction that is
    never mined would hold them until its sender's nonce moves on."""
    if not TX_HASH.fullmatch(tx_hash or ""):
        raise Refused("Must be 0x followed by 64 hexadecimal digits (the transaction's hash).")
    factory, version = payout_rows.factory_of(db.connection(), network.id)
    sent = client.call("eth_getTransactionByHash", [tx_hash.lower()])
    if not isinstance(sent, dict):
        raise Refused(f"The node of {network.name} does not know transaction {tx_hash} (yet): try"
                      " again in a moment.")
    if str(sent.get("to") or "").lower() != factory.lower():
        raise Refused(f"Transaction {tx_hash} is not a call to the forwarder factory of"
                      f" {network.name}.")
    deposits = [d for d in _named_deposits(db.connection(), factory, version, sent.get("input"))
                if d.merchant_id == merchant_id]  # it holds only its own: never another's
    if not deposits:
        raise Refused(f"Transaction {tx_hash} collects none of your deposit addresses on"
                      f" {network.name}.")
    what = "eth_getTransactionByHash"
    fee = sent.get("maxFeePerGas") or sent.get("gasPrice")
    c = Collection(
        id=0, network_id=network.id, chain_id=network.chain_id, factory=factory,
        sender=to_checksum_address(rpc.hex_address(sent.get("from"), what)),
        nonce=rpc.quantity(sent.get("nonce"), what), tx_hash=tx_hash.lower(), raw_tx="",
        gas_limit=rpc.quantity(sent.get("gas"), what), max_fee_per_gas=rpc.quantity(fee, what),
        status="pending", block_number=None, gas_used=None, gas_price=None, error=None,
        created_at=int(now), settled_at=None, recorded_by=merchant_id)
    claimed = [Item(0, d.address, GAS_COIN, d.process_id, d.merchant_id, d.payout_address, 0)
               for d in deposits]
    with db.transaction() as conn:
        payout_rows.lock_collections(conn, network.id)
        return payout_rows.insert_wallet_collection(conn, c, claimed) is not None


def _named_deposits(conn, factory, version, data) -> list:
    """The deposit addresses (Deposit, of any merchant) that a factory call's `data` (0x…) would
    empty, as the database knows them; empty when it is no collect call."""
    if not isinstance(data, str) or not re.fullmatch(r"0x(?:[0-9a-fA-F]{2})*", data):
        return []
    called = forwarder.collect_arguments(bytes.fromhex(data[2:]))
    if called is None:
        return []
    addresses = {forwarder.deposit_address(factory, payout, salt, version)
                 for payout, salt in called[1]}
    return sorted(payout_rows.deposits_at(conn, factory, addresses).values(),
                  key=lambda d: d.address)


def settle(db, network, merchant_id, client, now):
    """Settle the merchant's pending browser-wallet collections on `network` from their receipts
    (the module's docstring). RpcError (the node), NotProven (a block not on the kept chain) are
    left to the caller: nothing is recorded that is not proven."""
    pending = payout_rows.wallet_pending(db.connection(), network.id, merchant_id)
    if not pending:
        return
    found = canonical.receipts(client, [c.tx_hash for c in pending])
    kept = proofs.kept_hashes(db.connection(), network.id)
    head = client.block_number()
    report = SimpleNamespace(head=head, deep_enough=canonical.deep_enough(network, head),
                             kept_top=max(kept, default=None), settled=[])
    shim = SimpleNamespace(client=client)  # record_receipt reads the chain through `.client` only
    for c in pending:
        receipt = found[c.tx_hash]
        if receipt is not None:
            collection_records.record_receipt(db, shim, network, None, c, receipt, report, now)
            continue
        count = rpc.quantity(client.call("eth_getTransactionCount", [c.sender, "latest"]),
                             "eth_getTransactionCount")
        if count > c.nonce and client.call("eth_getTransactionByHash", [c.tx_hash]) is None:
            with db.transaction() as conn:
                payout_rows.revert(conn, c.id, "pending", "never mined: its nonce was used by"
                                   " another transaction", int(now))
