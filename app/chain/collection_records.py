"""What `collect`'s transactions moved, recorded from their own receipts and counted once confirmed
(app/chain/collect.py sends them; this settles them: in the same run, the next one, or the chain
watcher's next poll of the network, whichever comes first).

A collection is `pending` from the moment it is signed: not yet mined, or mined (its block and what
its logs show it moved recorded) and not yet deep enough (its confirmations, or the network's
finality tag) on the chain the watcher keeps.
It is `confirmed` when it is, and its receipt's block is proven canonical (app/evm/canonical.py:
the header read in the same step, linked to a kept block, the anchor). It is `reverted` when it
moved nothing: reverted by the EVM, never mined (its nonce used by another transaction, such as its
replacement), or removed by a reorganisation. Only confirmed collections count.

What it moved is read from its logs only: each ERC-20 Transfer from a payout-mode deposit address of
its factory to that address's payout address (the token is the log's contract), and the anonymous
log in which a version-2 forwarder states the gas coin it sent (forwarder.logs_gas_coin). Another
transaction of the same block, a stranger's collection or a second run's, changes none of it.

Who settles: `collect` (settle_earlier, with its key: it may broadcast again or replace a
transaction that is not mined) and the chain watcher on each poll of the network, after its
payments and refunds (settle_watched: read-only, no key, nothing sent), so a collection deep enough
is `confirmed` without another run. Both may run at once: every change is a guarded update of
app/data/payouts.py (from the state read; a collection confirmed or reverted by one is left alone
by the other), and a nonce is found used by another transaction only when none of its own
transactions is mined, read after the count that says it is used.
"""
import logging
from collections import defaultdict
from types import SimpleNamespace

from app.chain import proofs
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN, Item
from app.evm import canonical, forwarder, rpc
from app.evm.addresses import to_checksum_address
from app.evm.logs import TRANSFER_TOPIC
from app.evm.signer import ChainError, Reader

log = logging.getLogger(__name__)

# a replacement's fees over the replaced one's: nodes ask for at least +10 %
REPLACEMENT_BUMP = 1.125


def settle_earlier(db, sender, network, version, report, *, may_send, now, timeout):
    """Step 1 of a run (app/chain/collect.py's docstring); each collection this run changes is added
    to `report.settled` (`_settled`). ChainError when the node's chain is not the kept one,
    NotProven (an RpcError) when a receipt's block does not link to it."""
    now = int(now)
    conn = db.connection()
    kept = proofs.kept_hashes(conn, network.id)
    client = sender.client
    if kept:
        top = max(kept)
        header = client.header(top)
        if header is None or header.hash != kept[top]:
            raise ChainError(f"The chain of network {network.id} changed since the watcher last"
                             f" read it (block {top}): nothing is recorded or sent until it has"
                             " read it (run collect again in a moment).")
    # Depth counts from the head the watcher proved (read in one batch with its kept block), as
    # the tag mode counts from the tag's block it read: one node's lone eth_blockNumber, a block
    # far ahead, would confirm a collection not yet deep enough.
    head = network.head_block
    report.head, report.kept_top = head, max(kept, default=None)
    report.deep_enough = canonical.deep_enough(network, head)
    _settle(db, sender, network, version, kept, report, may_send=may_send, now=now,
            timeout=timeout)


def settle_watched(db, client, network, head, deep_enough, now) -> list:
    """The chain watcher's part, once per poll of the network after its payments and refunds
    (app/chain/watcher/loop.py): the pending collections settled and the confirmed ones whose
    anchor the kept chain lost read again, as `collect` does, read-only (no key: nothing
    broadcast again, nothing replaced). `head` and `deep_enough` are the poll's (the head it
    proved with its kept block, and the confirmations or the finality tag it read in that batch);
    the chain was checked against the kept one by the poll itself. Each change is logged;
    returns `_settled`'s list of them. RpcError (NotProven included) on a fault, nothing of the
    failing collection recorded; idle (nothing pending, no anchor lost) it makes no RPC call."""
    kept = proofs.kept_hashes(db.connection(), network.id)
    report = SimpleNamespace(head=head, deep_enough=deep_enough, kept_top=max(kept, default=None),
                             settled=[], replaced=[])
    _settle(db, Reader(client), network, None, kept, report, may_send=False, now=int(now),
            timeout=None)
    for c, _, _ in report.settled:
        state = (f"mined in block {c.block_number}, pending" if c.status == "pending"
                 and c.block_number is not None else c.status)
        log.info("watch %s: collection %s (nonce %d) %s%s", network.id, c.tx_hash, c.nonce, state,
                 f": {c.error}" if c.error else "")
    return report.settled


def _settle(db, sender, network, version, kept, report, *, may_send, now, timeout):
    """The confirmed collections whose anchor went read again, then the pending ones by sender and
    nonce (`sender`: a Sender, or a Reader when not `may_send`; `version`: the factory's, None to
    look up each collection's)."""
    _recheck(db, sender, network, kept,
             canonical.kept_floor(report.head, network.confirmations, report.deep_enough), now,
             report)
    groups = {}
    for c in payout_rows.open_collections(db.connection(), network.id):
        groups.setdefault((c.sender, c.nonce), c)
    for sender_address, nonce in groups:
        _settle_nonce(db, sender, network, version, sender_address, nonce, report,
                      may_send=may_send, now=now, timeout=timeout)


def _recheck(db, sender, network, kept, floor, now, report):
    """Confirmed collections whose anchor is no longer kept: read their block again."""
    conn = db.connection()
    if not kept:
        return
    lowest = canonical.recheck_from(kept, floor)
    moved = [c for c in payout_rows.confirmed_anchored(conn, network.id, lowest)
             if kept.get(c.anchor_block) != c.anchor_hash]
    if not moved:
        return
    proven = proofs.prove(sender.client, conn, network.id, {c.block_number for c in moved})
    for c in moved:
        header, anchor = proven[c.block_number]
        if header.hash == c.block_hash:
            with db.transaction() as tx:
                payout_rows.reanchor(tx, c.id, anchor)
            continue
        back = sender.receipt(c.tx_hash) is not None or sender.known(c.tx_hash)
        with db.transaction() as tx:
            if back:  # mined again, or held by the node: settled below, as any pending one
                payout_rows.unmine(tx, c.id, "confirmed")
            else:
                payout_rows.revert(tx, c.id, "confirmed", f"removed by a reorganisation (its block"
                                   f" {c.block_number} left the chain)", now)
        _settled(db, c, report)


def _settle_nonce(db, sender, network, version, sender_address, nonce, report, *, may_send, now,
                  timeout):
    conn = db.connection()
    rows = payout_rows.with_nonce(conn, network.id, sender_address, nonce)
    receipts, mined = _mined(sender.client, rows)
    count = None
    if mined is None:
        count = rpc.quantity(sender.client.call("eth_getTransactionCount",
                                                [sender_address, "latest"]),
                             "eth_getTransactionCount")
        if count > nonce:  # used: by one of these mined since their receipts were read (`collect`
            # and the watcher settle at once), or by another transaction
            receipts, mined = _mined(sender.client, rows)
    if mined is not None:
        replaced = [c for c in rows if c.id != mined.id and c.status == "pending"]
        with db.transaction() as tx:
            for c in replaced:
                payout_rows.revert(tx, c.id, "pending", f"replaced: nonce {nonce} was used by"
                                   f" {mined.tx_hash}", now)
        record_receipt(db, sender, network, version, mined, receipts[mined.tx_hash], report, now)
        for c in replaced + [mined]:
            _settled(db, c, report)
        return
    waiting = [c for c in rows if c.status == "pending"]
    if count > nonce:  # another transaction took the nonce
        with db.transaction() as tx:
            for c in waiting:
                payout_rows.revert(tx, c.id, "pending", "never mined: its nonce was used by another"
                                   " transaction", now)
        for c in waiting:
            _settled(db, c, report)
        return
    if may_send:
        _resend(db, sender, network, waiting[-1], report, now, timeout)


def _mined(client, rows):
    """({tx hash: Receipt or None} of the rows, the row that is mined or None): one batch."""
    receipts = canonical.receipts(client, (c.tx_hash for c in rows))
    return receipts, next((c for c in rows if receipts[c.tx_hash] is not None), None)


def _resend(db, sender, network, c, report, now, timeout):
    """The newest pending transaction of a nonce that is not mined: broadcast again when the node
    lost it; replaced (same nonce, higher fees) when this key signed it and the node refuses it or
    it has waited longer than `timeout`. A transaction of another key is only broadcast again."""
    known = sender.known(c.tx_hash)
    refused = None
    if not known:
        try:
            sender.broadcast(c.raw_tx)
        except rpc.RpcError as e:
            if e.code is None:
                raise  # unreachable: the next run tries again
            refused = e
    if c.sender != sender.address or (refused is None
                                      and (not known or now - c.created_at <= timeout)):
        return
    fees = sender.fees()
    bumped = type(fees)(
        max_fee_per_gas=max(fees.max_fee_per_gas, int(c.max_fee_per_gas * REPLACEMENT_BUMP) + 1),
        max_priority_fee_per_gas=max(fees.max_priority_fee_per_gas * 2,
                                     fees.max_priority_fee_per_gas + 1))
    signed = sender.resign(c.raw_tx, bumped)
    items = payout_rows.items_of(db.connection(), [c.id]).get(c.id, [])
    with db.transaction() as conn:
        replacement_id = payout_rows.insert_collection(conn, payout_rows.Collection(**{
            **c.__dict__, "id": 0, "tx_hash": signed.tx_hash, "raw_tx": signed.raw,
            "max_fee_per_gas": bumped.max_fee_per_gas, "created_at": int(now)}), items)
    replacement = payout_rows.get_collection(db.connection(), replacement_id)
    why = f"refused by the node ({refused})" if refused else f"not mined after {timeout} s"
    report.replaced.append((c.tx_hash, signed.tx_hash, why))
    try:
        sender.broadcast(signed.raw)
    except rpc.RpcError as e:
        raise ChainError(f"The collection {c.tx_hash} (nonce {c.nonce}) was {why}; its replacement"
                         f" {signed.tx_hash} was refused too: {e}") from None
    receipt = sender.wait(signed.tx_hash, timeout)
    if receipt is None:
        raise ChainError(f"The collection {c.tx_hash} (nonce {c.nonce}) was {why}; its replacement"
                         f" {signed.tx_hash} is not mined yet: nothing more is sent until one of"
                         " them is (run collect again later).")
    record_receipt(db, sender, network, None, replacement, receipt, report, now)
    _settled(db, replacement, report)


def record_receipt(db, sender, network, version, c, receipt, report, now):
    """A collection's receipt: reverted by the EVM, or mined with what its logs show it moved
    (pending), and confirmed when deep enough (the network's confirmations, or its finality tag)
    and proven on the kept chain (`report`: the run's depth and the watcher's newest kept block).
    Returns the items it moved (empty when reverted)."""
    conn = db.connection()
    if version is None:
        version = _version(conn, network.id, c.factory)
    if receipt.status != 1:
        with db.transaction() as tx:
            payout_rows.revert(tx, c.id, c.status, "reverted", int(now), receipt=receipt)
        return []
    note = c.note or _note(conn, c, version)
    items = moved(conn, c, receipt, version)
    deep = receipt.block_number <= report.deep_enough
    proven = None
    if deep and report.kept_top is not None and receipt.block_number <= report.kept_top:
        proven = canonical.prove_receipt(
            proofs.prove(sender.client, conn, network.id, [receipt.block_number]), receipt)
    with db.transaction() as tx:
        payout_rows.mined(tx, c.id, receipt, items, note)
        if proven is not None:
            payout_rows.confirm(tx, c.id, proven[1], int(now))
    return items


def moved(conn, c, receipt, version) -> list:
    """The items the receipt's logs show moved (the module's docstring), per address and token."""
    return moved_from(c, receipt, version,
                      lambda addresses: payout_rows.deposits_at(conn, c.factory, addresses))


def moved_from(c, receipt, version, deposits_at) -> list:
    """`moved`, with `deposits_at(addresses)` giving {address: Deposit} of the collection's
    factory among them (`reconcile` reads them from its snapshot)."""
    logs = [raw for raw in receipt.logs if isinstance(raw.get("topics"), list)]
    gas_logged = forwarder.logs_gas_coin(version)
    sources = [_checksum_or_none(_source(raw, gas_logged)) for raw in logs]
    deposits = deposits_at({a for a in sources if a is not None})
    amounts = defaultdict(int)
    for raw, source in zip(logs, sources, strict=True):
        deposit = deposits.get(source)
        if deposit is None:
            continue
        if not raw["topics"]:  # the forwarder's own log: the gas coin it sent
            amounts[(source, GAS_COIN)] += rpc.word(raw.get("data"), "a forwarder's log")
            continue
        entry = canonical.transfer_log(raw)
        if entry is not None and entry.to_address == deposit.payout_address.lower():
            amounts[(source, to_checksum_address(entry.token))] += entry.amount
    return [Item(c.id, address, token, deposits[address].process_id, deposits[address].merchant_id,
                 deposits[address].payout_address, amount)
            for (address, token), amount in sorted(amounts.items()) if amount]


def _source(raw, gas_logged):
    """The address a log may show money leaving: a Transfer's sender, or the emitter of an
    anonymous log (a version-2 forwarder's); else None."""
    topics = raw["topics"]
    if len(topics) == 3 and str(topics[0]).lower() == TRANSFER_TOPIC:
        return "0x" + str(topics[1])[-40:]
    if not topics and gas_logged:
        return raw.get("address")
    return None


def _checksum_or_none(value):
    if not isinstance(value, str):
        return None
    try:
        return to_checksum_address(value)
    except ValueError:
        return None


def _note(conn, c, version):
    """A first-release factory's collection: the gas coin read before sending, not measured."""
    if forwarder.logs_gas_coin(version):
        return None
    planned = sum(i.amount for i in payout_rows.items_of(conn, [c.id]).get(c.id, [])
                  if i.token == GAS_COIN)
    if not planned:
        return None
    return (f"{planned} wei of the gas coin, read before sending, may have moved unmeasured: this"
            " network's factory (of the first release) does not log it")


def _version(conn, network_id, factory):
    found = payout_rows.factory_of(conn, network_id)
    return found[1] if found and found[0] == factory else 1


def _settled(db, before, report):
    """Add the collection to `report.settled` when this run changed it: (Collection, items, first
    mined now: what it moved was never reported before)."""
    conn = db.connection()
    after = payout_rows.get_collection(conn, before.id)
    if (after.status, after.block_hash) == (before.status, before.block_hash):
        return
    first = before.block_number is None and after.status != "reverted"
    report.settled.append((after, payout_rows.items_of(conn, [after.id]).get(after.id, []), first))
