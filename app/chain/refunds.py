"""Refund settlement, the chain watcher's part for refunds (called once per poll of a network,
after its payments: app/chain/watcher.py).

A pending refund is settled by a confirmed Transfer log of its token, on its network, to its
(the customer's) address, of at least its amount, in a block whose timestamp is later than the
refund's createdAt; one transfer settles one refund, the oldest refund first. The refund becomes
`completed` with its `refund.completed` event in one transaction.

Only blocks already `confirmations` deep are read (`eth_getLogs` by topic2 = the refund addresses,
for their tokens), so nothing read can be reorganised away short of a reorganisation deeper than
the confirmation depth. Payments report that case (`payment.reversed`); a completed refund whose
transfer leaves the chain that way stays `completed`: the merchant's own wallet sent it, and sees
it gone. Each refund keeps the
block it was searched up to (`scanned_block`), so a poll reads only the new deep blocks; blocks are
read in steps of at most `max_range`, each step committed with the position it reached. Several
watchers may run at once: the completion is a guarded UPDATE from `pending`, and a transfer that
settled one refund is never used for another (a unique index holds it)."""
import logging

from app.chain.rpc import RpcError
from app.data import processes as process_rows
from app.data import refunds as refund_rows
from app.outbox import emit

log = logging.getLogger(__name__)


def settle(db, client, network, head, now, *, max_range, max_addresses) -> int:
    """Search the network's deep blocks for the transfers of its pending refunds; complete those
    paid. Returns how many were completed. RpcError on a fault (nothing of the step committed)."""
    deep_enough = head - network.confirmations + 1
    pending = [r for r in refund_rows.pending_on(db.connection(), network.id)
               if r.scanned_block < deep_enough]
    if not pending:
        return 0
    completed = 0
    first = min(r.scanned_block for r in pending) + 1
    while first <= deep_enough:
        last = min(deep_enough, first + max_range - 1)
        waiting = [r for r in pending if r.scanned_block < last]
        logs = _logs(client, first, last, waiting, max_addresses)
        headers = client.headers({entry.block_number for entry in logs}) if logs else {}
        for entry in logs:
            header = headers[entry.block_number]
            if header is None or header.hash != entry.block_hash:
                raise RpcError(f"block {entry.block_number} changed during the refunds' scan")
        with db.transaction() as conn:
            completed += _complete_paid(conn, network, logs, headers, now)
            refund_rows.advance(conn, network.id, last)
        first = last + 1
    if completed:
        log.info("watch %s: %d refunds completed", network.id, completed)
    return completed


def _logs(client, first, last, refunds, max_addresses):
    """The Transfer logs in [first, last] of the refunds' tokens to their addresses, by block."""
    tokens = sorted({r.token_contract.lower() for r in refunds})
    recipients = sorted({r.address.lower() for r in refunds})
    logs = []
    for i in range(0, len(recipients), max_addresses):
        logs += client.transfer_logs(first, last, tokens, recipients[i:i + max_addresses])
    return sorted(logs, key=lambda entry: (entry.block_number, entry.log_index))


def _complete_paid(conn, network, logs, headers, now) -> int:
    """Complete, in the caller's transaction, each pending refund (read again here: one cancelled
    meanwhile is left alone) that one of `logs` pays; the oldest refund takes the earliest
    transfer."""
    if not logs:
        return 0
    used = set()
    completed = 0
    for refund in refund_rows.pending_on(conn, network.id):
        for entry in logs:
            key = (entry.tx_hash, entry.log_index)
            if (key in used or entry.token != refund.token_contract.lower()
                    or entry.to_address != refund.address.lower()
                    or entry.block_number <= refund.scanned_block
                    or entry.amount < refund.amount
                    or headers[entry.block_number].timestamp <= refund.created_at):
                continue
            used.add(key)
            if refund_rows.transfer_used(conn, network.chain_id, *key):
                continue
            if refund_rows.complete(conn, refund.id, tx_hash=entry.tx_hash,
                                    log_index=entry.log_index, block_number=entry.block_number,
                                    block_timestamp=headers[entry.block_number].timestamp,
                                    amount=entry.amount, now=now):
                emit(conn, "refund.completed", process_rows.get(conn, refund.process_id), now)
                completed += 1
            break
    return completed
