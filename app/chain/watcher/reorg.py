"""Reorganisations: the poll's first batch read the newest kept block; a hash that differs means the
chain changed under the kept hashes (docs/payments.md, "Reorganisations").

Every kept block is then asked again of one node that also has the head's block (a lagging node
does not make the watcher rewind); the highest it still has is the fork (none: the start block).
Unconfirmed transfers above it are `orphaned` (no event), confirmed ones whose block is gone on
that chain `reversed` (with `payment.reversed`; an ERROR when that reaches below the tag's block or
the confirmations), and the scan position goes back.
"""
import logging

from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import transfers as transfer_rows
from app.data import unexpected as unexpected_rows
from app.data.transfers import PAYING, UNEXPECTED
from app.domain.outbox import emit
from app.evm.pins import Pins
from app.evm.rpc import TAGS

log = logging.getLogger("app.chain.watcher")


def check(db, client, network, head, reads, now) -> bool:
    """Rewind past a reorganisation the first batch revealed; True when it rewound (the caller
    reads the watched set whole again)."""
    kept = reads.kept
    if kept is None:
        return False
    header = reads.kept_header  # read with the head, in the first batch
    if header is not None and header.hash == kept.hash:
        return False
    reads.tag = None  # from a node without the kept chain: nothing counts by it this poll
    kept = transfer_rows.blocks_from_top(db.connection(), network.id,
                                         min(network.scanned_block, head))
    # Replaced, or not on the node that answered (a lagging one, one on another fork): one node
    # that has the head answers for every kept block at once, in one batch.
    pins = Pins(network.chain_id, {head: None})
    found = client.headers([block.number for block in kept], pins=pins)
    fork = next((block.number for block in kept if found[block.number] is not None
                 and found[block.number].hash == block.hash), None)
    if fork == kept[0].number:
        return False
    log.warning("watch %s: block %d was replaced: reorganisation", network.id, kept[0].number)
    if fork is None:
        fork = _below_every_kept_hash(network, kept)
    else:  # the transfers' blocks are asked of a node on the same chain as the fork's
        pins = Pins(None, {head: pins.headers[head].hash, fork: found[fork].hash})
    gone = _left_the_chain(db, client, network, fork, pins)
    reversed_, orphaned = _rewind(db, network, head, fork, gone, now)
    _report(network, fork, reversed_, orphaned)
    return True


def _rewind(db, network, head, fork, gone, now):
    """One transaction: `gone` (table, transfer) reversed (an unexpected one had counted only if
    accepted as payment), each with its `payment.reversed`, the unconfirmed transfers above `fork`
    orphaned, the kept blocks above it forgotten, the scan position back to it. (reversed
    transfers, how many orphaned)."""
    with db.transaction() as conn:
        transfer_rows.set_head(conn, network.id, head)
        reversed_ = [t for table, t in gone if table == PAYING and transfer_rows.reverse(conn, t)]
        for table, t in gone:
            if table == UNEXPECTED:
                accepted = unexpected_rows.get(conn, t.process_id, t.tx_hash, t.log_index)
                if (transfer_rows.reverse(conn, t, table=UNEXPECTED)
                        and accepted.accepted_at is not None):
                    reversed_.append(t)
        for transfer in reversed_:  # each event shows the process without that transfer
            emit(conn, "payment.reversed", process_rows.get(conn, transfer.process_id), now)
        orphaned = sum(transfer_rows.orphan_above(conn, network.id, fork, table=table)
                       for table in (PAYING, UNEXPECTED))
        transfer_rows.forget_blocks_above(conn, network.id, fork)
        transfer_rows.rewind(conn, network.id, fork)
        payment_rows.tag_replaced(conn, network.id, fork)
    return reversed_, orphaned


def _report(network, fork, reversed_, orphaned):
    if network.finality in TAGS and network.tag_block is not None and fork < network.tag_block:
        # what the node called final (or safe) was replaced: the chain broke its promise
        log.error("watch %s: a reorganisation replaced blocks from %d, at or below the node's"
                  " \"%s\" block %d: %d confirmed transfers left the chain (payment.reversed)",
                  network.id, fork + 1, network.finality, network.tag_block, len(reversed_))
    elif reversed_:  # the operator's confirmation depth was too shallow for this chain
        log.error("watch %s: reorganisation deeper than %d confirmations: %d confirmed transfers"
                  " left the chain (payment.reversed)", network.id, network.confirmations,
                  len(reversed_))
    log.warning("watch %s: reading again from block %d; %d unconfirmed transfers orphaned",
                network.id, fork + 1, orphaned)


def _left_the_chain(db, client, network, fork, pins):
    """(table, transfer) of the confirmed transfers (paying and unexpected) above `fork` whose
    block the node no longer has under their hash (kept hashes are sparse: a block above the fork
    may still be the node's), asked in batches carrying `pins` (the chain id, the head's block and
    the fork's): a node switched to another chain or fork under the poll reverses nothing."""
    conn = db.connection()
    counted = [(table, t) for table in (PAYING, UNEXPECTED)
               for t in transfer_rows.confirmed_above(conn, network.id, fork, table=table)]
    if not counted:
        return []
    canonical = client.headers((t.block_number for _, t in counted), pins=pins)
    return [(table, t) for table, t in counted if canonical[t.block_number] is None
            or canonical[t.block_number].hash != t.block_hash]


def _below_every_kept_hash(network, kept):
    """The fork point when every kept hash was replaced. A kept hash is a step's last block only,
    so the fork may lie anywhere below the lowest one, in blocks whose hashes were never kept: the
    watcher reads again from its start block (confirmed transfers are not counted twice, seen ones
    are revived). Slow only after a reorganisation this deep, or one in the watcher's first steps,
    where the start is near; never a missed transfer."""
    replaced = network.scanned_block - kept[-1].number + 1  # at least this many blocks
    report = log.error if replaced >= network.confirmations else log.warning
    report("watch %s: no kept block hash is on the chain any more (the reorganisation replaced"
           " at least %d blocks, confirmations are %d): reading again from the start block %d",
           network.id, replaced, network.confirmations, network.start_block)
    return network.start_block - 1
