"""The confirm phase, after a poll's steps: `seen` transfers with `confirmations` blocks (or at or
below the tag's block) become `confirmed` when one node that has the newest kept block under its
hash, the head's block (and the tag's under its hash) has theirs under their hash (a block this
poll's steps proved is not asked again); each process gets `payment.completed`, `payment.partial`
or `payment.received_late` (final already, or after its expiry), CONFIRM_BATCH a commit. A
transfer whose block that node does not have is orphaned, and reading goes back to the highest kept
hash below it. The unexpected transfers deep enough are reported (unexpected.py).
"""
import logging
from collections import Counter, defaultdict

from app.chain.watcher import unexpected
from app.chain.watcher.record import outcomes_text
from app.chain.watcher.window import deep_enough
from app.data import transfers as transfer_rows
from app.data.transfers import PAYING, UNEXPECTED
from app.domain.settlement import settle_all
from app.evm.pins import Pins
from app.evm.rpc import ChainMoved

log = logging.getLogger("app.chain.watcher")

CONFIRM_BATCH = 200  # processes settled per transaction (each with its event)


def confirm(db, client, network, head, reads, now, described) -> bool:
    """The confirm phase; True when a replaced block made it rewind (the caller reads the watched
    set whole again)."""
    depth = deep_enough(network, head, reads)
    conn = db.connection()
    due = transfer_rows.seen_up_to(conn, network.id, depth)
    strays = transfer_rows.seen_up_to(conn, network.id, depth, table=UNEXPECTED)
    if not due and not strays:
        return False
    canonical = _canonical(db, client, network, head, reads, due + strays)
    replaced = {t.block_number: t.block_hash for t in due + strays
                if canonical[t.block_number] != t.block_hash}
    depth = deep_enough(network, head, reads)  # that batch asked the tag again: the lowest counts
    due = [t for t in due if t.block_number <= depth]
    strays = [t for t in strays if t.block_number <= depth]
    for number, block_hash in sorted(replaced.items()):
        _orphan(db, network, number, block_hash)
    by_process = defaultdict(list)
    for transfer in due:
        if transfer.block_number not in replaced:
            by_process[transfer.process_id].append(transfer)
    _settle(db, network, head, list(by_process.items()), now)
    unexpected.report(db, client, network, head,
                      [t for t in strays if t.block_number not in replaced], now, described)
    return bool(replaced)


def _canonical(db, client, network, head, reads, transfers) -> dict:
    """{block number: the node's hash there (None: no block)} for the transfers' blocks. A block
    proven by this poll's steps is of the chain through the newest kept block, the head (and the
    tag): read again only the others."""
    canonical = dict(reads.proven)
    unread = {t.block_number for t in transfers} - set(canonical)
    if unread:
        pins = _pins(db, network, head, reads)
        found = client.headers(unread, pins=pins)
        reads.lower_tag(pins.lowest_tag)
        canonical.update((n, h.hash if h is not None else None) for n, h in found.items())
    return canonical


def _orphan(db, network, number, block_hash):
    """Block `number`, where a `seen` transfer was recorded, is not on the kept chain. The blocks
    below it may have gone too: read again from the highest kept hash below
    it, which the next poll checks (walking down when it is gone as well)."""
    with db.transaction() as conn:
        for table in (PAYING, UNEXPECTED):
            transfer_rows.orphan_block(conn, network.id, number, block_hash, table=table)
        transfer_rows.forget_blocks_above(conn, network.id, number - 1)
        below = transfer_rows.blocks_from_top(conn, network.id, number)
        transfer_rows.rewind(conn, network.id, below[0].number if below
                             else network.start_block - 1)
    log.warning("watch %s: block %d was replaced: transfer orphaned", network.id, number)


def _settle(db, network, head, pending, now):
    """Confirm `pending` [(process id, its due transfers)] and settle each process, one commit
    (one sync) per CONFIRM_BATCH processes."""
    outcomes = Counter()
    for i in range(0, len(pending), CONFIRM_BATCH):
        with db.transaction() as conn:
            transfer_rows.set_head(conn, network.id, head)  # before the events show it
            confirmed = {}
            for process_id, transfers in pending[i:i + CONFIRM_BATCH]:
                done = [t for t in transfers if transfer_rows.confirm(conn, t, now)]
                if done:
                    confirmed[process_id] = done
            outcomes += settle_all(conn, confirmed, now)
    if outcomes:  # one line per poll; each process's event is in the outbox
        log.info("watch %s: transfers confirmed %s", network.id, outcomes_text(outcomes))


def _pins(db, network, head, reads):
    """The confirm phase's pins: the newest kept block under its kept hash (the chain every `seen`
    transfer was proven on; without one, the chain id), the head's block (that chain is as long as
    the head the depths are counted from), and under a finality mode the tag's block under its
    hash (the transfers' blocks are below it on its chain) and the tag asked again."""
    blocks = {head: None}
    newest = transfer_rows.newest_block(db.connection(), network.id, network.scanned_block)
    if newest is not None:
        blocks[newest.number] = newest.hash
    if reads.tag is not None:
        if blocks.get(reads.tag.number, reads.tag.hash) not in (None, reads.tag.hash):
            raise ChainMoved(f"block {reads.tag.number} is not the tag's {reads.tag.hash}")
        blocks[reads.tag.number] = reads.tag.hash
    return Pins(None if newest is not None else network.chain_id, blocks,
                tag=reads.tag_name(network))
