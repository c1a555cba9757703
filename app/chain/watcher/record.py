"""Recording what a scan step read (window.Window), in one transaction that decides seen, confirmed
or completing.

The settlement itself (the event, completion when paid) is the domain's: app/domain/settlement.py.

A step's transaction: the head, the new transfers (`seen`, with `payment.pending`), the step's last
block's hash, the scan position by compare-and-set (a watcher that lost the race rolls back).
Transfers already deep enough that complete their process are recorded `confirmed` and settled
there (`payment.completed`): a catch-up writes each transfer once. Any other deep transfer waits,
`seen`, for the confirm phase (app/chain/watcher/confirm.py), which settles each process's deep
transfers together: one event, the outcome only.
"""
from collections import defaultdict
from dataclasses import replace

from app.core.records import Transfer
from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import transfers as transfer_rows
from app.data.transfers import UNEXPECTED
from app.domain.outbox import emit
from app.domain.settlement import in_time, on_choice, paid, settle_all
from app.evm.canonical import KEEP_BLOCKS, kept_floor


class LostRace(Exception):
    """Another watcher moved the scan position during this step: roll back, read it again."""


def record_step(db, network, head, window, deep_enough, now, final_since):
    """The step's transaction. (paying, strays, outcomes): how many transfers were recorded of
    each kind and the events written, by type. LostRace when another watcher read these blocks
    first (nothing committed). `final_since`: a process final before it is not watched any more."""
    with db.transaction() as conn:
        ids = {m.process_id for _, m in window.paying} | {pid for _, pid in window.strays}
        gone = transfer_rows.final_before(conn, ids, final_since) if ids else set()
        transfers = [_transfer(network, entry, match.process_id, window.headers, deep_enough, now)
                     for entry, match in window.paying if match.process_id not in gone]
        strays = [_transfer(network, entry, pid, window.headers, -1, now)
                  for entry, pid in window.strays if pid not in gone]
        transfer_rows.set_head(conn, network.id, head)  # before the events show it
        completing = _completing(conn, transfers, deep_enough)
        confirmed = _record_paying(conn, transfers, completing, deep_enough, now)
        outcomes = settle_all(conn, confirmed, now, read=completing)
        for transfer in strays:  # confirmed and reported by the confirm phase
            transfer_rows.record(conn, transfer, table=UNEXPECTED)
        tip = window.tip
        transfer_rows.save_block(conn, network.id, tip.number, tip.hash, tip.parent_hash,
                                 tip.timestamp)
        transfer_rows.prune_blocks(conn, network.id, kept_floor(
            head, network.confirmations, deep_enough), KEEP_BLOCKS)
        if not transfer_rows.advance(conn, network.id, window.first - 1, window.last):
            raise LostRace()
    return len(transfers), len(strays), outcomes


def _transfer(network, entry, process_id, headers, deep_enough, now) -> Transfer:
    """The log as a Transfer: `confirmed` when deep enough (a catch-up's usual case; made `seen`
    again by _record_paying unless it completes its process), else `seen`."""
    deep = entry.block_number <= deep_enough
    return Transfer(
        chain_id=network.chain_id, tx_hash=entry.tx_hash, log_index=entry.log_index,
        network_id=network.id, process_id=process_id, token_contract=entry.token,
        from_address=entry.from_address, amount=entry.amount,
        block_number=entry.block_number, block_hash=entry.block_hash,
        block_timestamp=headers[entry.block_number].timestamp,
        status="confirmed" if deep else "seen", seen_at=now, confirmed_at=now if deep else None)


def _record_paying(conn, transfers, completing, deep_enough, now) -> dict:
    """Each paying transfer recorded: `confirmed` when it completes its process, else `seen`, a new
    shallow one with its `payment.pending`. {process id: its transfers recorded confirmed}."""
    confirmed = defaultdict(list)
    for transfer in transfers:
        deep = transfer.block_number <= deep_enough
        if deep and transfer.process_id not in completing:
            transfer = replace(transfer, status="seen", confirmed_at=None)
        recorded = transfer_rows.record(conn, transfer)
        if recorded and transfer.status == "confirmed":
            confirmed[transfer.process_id].append(transfer)
        elif recorded == "new" and not deep:
            emit(conn, "payment.pending", process_rows.get(conn, transfer.process_id), now)
    return confirmed


def _completing(conn, transfers, deep_enough) -> dict:
    """The processes that the step's transfers already deep enough complete (a watcher catching
    up): these are recorded `confirmed` and settled in the step's own transaction, as the confirm
    phase would settle them (the step's pins prove their blocks and depth). Any other outcome
    (partial, late), or a process with a transfer still `seen` from an earlier step, waits for the
    confirm phase at the end of the poll. {process id: (process, view)}, as read before the step
    records anything."""
    arriving = defaultdict(list)
    for t in transfers:
        if t.block_number <= deep_enough:
            arriving[t.process_id].append(t)
    if not arriving:
        return {}
    processes = process_rows.get_many(conn, arriving)
    views = payment_rows.views_of(conn, arriving)
    completing = {}
    for process_id, new in arriving.items():
        process, view = processes[process_id], views[process_id]
        known = {(t.chain_id, t.tx_hash, t.log_index) for t in view.transfers}
        new = [t for t in new if (t.chain_id, t.tx_hash, t.log_index) not in known]
        if (process.status == "pending" and in_time(process, new)
                and all(on_choice(view.payment, t) for t in new)  # else: rescaled later
                and all(t.status == "confirmed" for t in view.transfers)
                and view.payment.covered_by(
                    paid(in_time(process, view.transfers + tuple(new))))):
            completing[process_id] = (process, view)
    return completing


def outcomes_text(outcomes):
    """'in 4 processes: 3 payment.completed, 1 payment.partial', for the log."""
    return (f"in {sum(outcomes.values())} processes: "
            + ", ".join(f"{n} {e}" for e, n in sorted(outcomes.items())))
