"""Refund settlement, the chain watcher's part for refunds (called once per poll of a network,
after its payments: app/chain/watcher/). The rules are docs/payments.md's ("Refunds").

Only the merchant's own payment settles a refund, never a bystander's:
- a transaction the merchant named (app/domain/refunds.py, name_transaction): once deep enough (the
  network's confirmations, or its finality tag),
  its receipt completes the refund when it holds a Transfer of the refund's token to the refund's
  address of at least its amount, in a block stamped at or after createdAt, that settled no other
  refund, and whose sender is no bystander: not the refund's own address (the customer paying
  itself), not an address that paid this process (the customer's wallet), not another merchant's
  (payout, deposit, or one its deposits forward to: app/data/payouts.py merchants_of). Another
  wallet of the merchant's (an exchange's, a second wallet) may pay a named refund: the service
  cannot tell it from a stranger's, and the merchant names it. One holding none leaves the refund
  pending, its name cleared and kept with the reason (a sentence the merchant reads on the Refund
  object and the console), and a log line saying why;
- without a name: a confirmed Transfer sent from the merchant's payout address (the current one, or
  the one the payment's deposit address forwards to), to the refund's address (not that address
  itself), of at least its amount, in a block stamped after createdAt; the pending refund of
  exactly that amount first, then the oldest it covers. A transfer from anyone else (the customer
  included) settles nothing, nor does one from an address several merchants share (data from
  before set-payout refused it). A transaction the same merchant named for another refund is left
  to it; another merchant's name does not hold it back.
One transfer settles one refund (a unique index holds it), a completion and its `refund.completed`
event are one transaction, and a refund cancelled meanwhile is left alone. A completed refund keeps
its transfer's sender (EIP-55: the Refund object's `sender`).

Everything recorded is proven (app/evm/canonical.py): the block hash of the log or receipt is the
one of a header read in the same step and linked to the kept chain; the refund keeps that proof's
anchor. Each poll looks, in the database only, whether the anchors of completed refunds are still
kept; a refund whose anchor went is read again, and if its transfer's block left the chain (a
reorganisation deeper than the confirmations) it goes back to `pending` with `refund.reversed`.

Only blocks at or below both the confirmation depth and the newest kept block are read: the found
transfers by `eth_getLogs` (topic2 = the refunds' addresses, their tokens), from each refund's
`scanned_block` on, in steps of at most `max_range`, each eth_getLogs in one batch with the lowest
kept block at or above the step's end under its kept hash (a node lagging below it fails the step
instead of answering an empty list the search would move past), each step committed with the
position it reached; a named refund keeps its position (searched again from there if its name is
cleared). Idle (no pending refund, no completed one whose anchor moved), a poll makes no RPC call
here.
"""
import logging

from app.chain import proofs
from app.data import payouts as payout_rows
from app.data import processes as process_rows
from app.data import refunds as refund_rows
from app.domain.outbox import emit
from app.evm import canonical
from app.evm.addresses import to_checksum_address
from app.evm.canonical import NotProven

log = logging.getLogger(__name__)


def settle(db, client, network, head, deep_enough, now, *, max_range, max_addresses) -> int:
    """Undo the completions whose transfer left the chain, then complete the pending refunds that a
    named or found transfer pays, in blocks up to `deep_enough` (the watcher's: by confirmations or
    by the network's finality tag). Returns how many were completed. RpcError (NotProven included)
    on a fault: nothing of the failing step committed."""
    kept = proofs.kept_hashes(db.connection(), network.id)
    if not kept:  # the watcher has kept no block yet: nothing can be proven
        return 0
    _recheck(db, client, network, kept,
             canonical.kept_floor(head, network.confirmations, deep_enough), now)
    deep_enough = min(deep_enough, max(kept))
    completed = _settle_named(db, client, network, deep_enough, now)
    completed += _settle_found(db, client, network, kept, deep_enough, now, max_range,
                               max_addresses)
    if completed:
        log.info("watch %s: %d refunds completed", network.id, completed)
    return completed


# --- completed refunds whose proof is no longer kept ---------------------------------------------

def _recheck(db, client, network, kept, floor, now):
    conn = db.connection()
    lowest = canonical.recheck_from(kept, floor)
    moved = [r for r in refund_rows.completed_anchored(conn, network.id, lowest)
             if kept.get(r.anchor_block) != r.anchor_hash]
    if not moved:
        return
    proven = proofs.prove(client, conn, network.id, {r.block_number for r in moved})
    with db.transaction() as conn:
        for refund in moved:
            header, anchor = proven[refund.block_number]
            if header.hash == refund.block_hash:
                refund_rows.reanchor(conn, refund.id, anchor.number, anchor.hash)
            elif refund_rows.reverse(conn, refund, now):
                emit(conn, "refund.reversed", process_rows.get(conn, refund.process_id), now)
                log.error("watch %s: refund %s: its transfer %s left the chain (block %d replaced,"
                          " a reorganisation deeper than %d confirmations): pending again"
                          " (refund.reversed)", network.id, refund.id, refund.tx_hash,
                          refund.block_number, network.confirmations)


# --- named transactions --------------------------------------------------------------------------

def _settle_named(db, client, network, deep_enough, now) -> int:
    conn = db.connection()
    named = [r for r in refund_rows.pending_on(conn, network.id) if r.named_tx_hash]
    if not named:
        return 0
    found = canonical.receipts(client, (r.named_tx_hash for r in named))
    ready = [(r, found[r.named_tx_hash]) for r in named
             if found[r.named_tx_hash] is not None
             and found[r.named_tx_hash].block_number <= deep_enough]
    if not ready:
        return 0
    proven = proofs.prove(client, conn, network.id, {receipt.block_number for _, receipt in ready})
    for _, receipt in ready:
        canonical.prove_receipt(proven, receipt)
    owners = _owners(conn, (entry for refund, receipt in ready for entry in _to(refund, receipt)))
    completed = 0
    with db.transaction() as conn:
        for refund, receipt in ready:
            header, anchor = proven[receipt.block_number]
            entry, why = _paying(conn, network, refund, receipt, header, owners)
            if entry is None:
                reason = f"Transaction {refund.named_tx_hash} {why}."
                if refund_rows.clear_name(conn, refund.id, refund.named_tx_hash, reason, now):
                    log.warning("watch %s: refund %s: transaction %s %s: its name is cleared and"
                                " the refund stays pending", network.id, refund.id,
                                refund.named_tx_hash, why)
            elif refund_rows.complete(conn, refund.id, entry,
                                      to_checksum_address(entry.from_address), header, anchor,
                                      now):
                emit(conn, "refund.completed", process_rows.get(conn, refund.process_id), now)
                completed += 1
    return completed


def _to(refund, receipt) -> list:
    """The receipt's Transfers (logs.Log) of the refund's token to the refund's address. Only the
    token's own logs are parsed (strictly): another contract's odd log in the same transaction is
    none of the refund's business, and must not make every poll a fault."""
    token, to = refund.token_contract.lower(), refund.address.lower()
    own = [raw for raw in receipt.logs if str(raw.get("address")).lower() == token]
    return [entry for entry in map(canonical.transfer_log, own)
            if entry is not None and entry.to_address == to]


def _owners(conn, entries) -> dict[str, set[str]]:
    """{sender, lowercase: the merchants it belongs to} for the senders of `entries` (logs.Log)."""
    return payout_rows.merchants_of(conn, {to_checksum_address(e.from_address) for e in entries})


def _paying(conn, network, refund, receipt, header, owners):
    """(the transfer of the confirmed `receipt` that pays `refund`, None) or (None, why not: a
    phrase the merchant reads after "Transaction 0x…"). `owners`: _owners of the receipt's
    transfers. A bystander's transfer settles nothing: one from the refund's own address (the
    customer paying itself), from an address that paid this process (the customer's), or from an
    address that is another merchant's (that merchant's payment, whoever named it). The reason
    never says whose an address is: one merchant learns nothing of another's."""
    if receipt.status != 1:
        return None, "reverted"
    if header.timestamp < refund.created_at:
        return None, "is in a block stamped before the refund was made"
    transfers = _to(refund, receipt)
    if not transfers:
        return None, "holds no transfer of the refund's token to the refund's address"
    transfers = [entry for entry in transfers if entry.from_address != refund.address.lower()]
    if not transfers:
        return None, ("moves the refund's token to the refund's address only from that address"
                      " itself (the customer paying itself): only your own payment settles your"
                      " refund")
    transfers = [entry for entry in transfers
                 if not owners.get(entry.from_address, set()) - {refund.merchant_id}]
    if not transfers:
        return None, ("was sent from an address that is not yours alone: only your own payment"
                      " settles your refund")
    payers = refund_rows.payers_of(conn, refund.process_id)  # the customer's, unless yours
    transfers = [entry for entry in transfers if entry.from_address not in payers
                 or refund.merchant_id in owners.get(entry.from_address, ())]
    if not transfers:
        return None, ("was sent from an address that paid this process (the customer's): only your"
                      " own payment settles your refund")
    enough = [entry for entry in transfers if entry.amount >= refund.amount]
    if not enough:
        return None, "moves less than the refund's amount to the refund's address"
    free = [entry for entry in enough
            if not refund_rows.transfer_used(conn, network.chain_id, entry.tx_hash,
                                             entry.log_index)]
    if not free:
        return None, "holds only transfers that settled other refunds"
    return free[0], None


# --- transfers found from the merchant's payout address ------------------------------------------

def _settle_found(db, client, network, kept, deep_enough, now, max_range, max_addresses) -> int:
    conn = db.connection()
    senders = refund_rows.payout_senders(conn, network.id)
    pending = [r for r in refund_rows.pending_on(conn, network.id)
               if r.id in senders and r.scanned_block < deep_enough]
    if not any(senders[r.id] for r in pending):  # nobody can pay them unnamed: nothing to read
        if pending:
            with db.transaction() as conn:
                refund_rows.advance(conn, network.id, deep_enough)
        return 0
    completed = 0
    first = min(r.scanned_block for r in pending) + 1
    while first <= deep_enough:
        last = min(deep_enough, first + max_range - 1)
        waiting = [r for r in pending if r.scanned_block < last and senders[r.id]]
        pins = canonical.pins_for(kept, last)
        logs = _logs(client, first, last, waiting, max_addresses, pins) if waiting else []
        payers = set().union(*(senders[r.id] for r in waiting))
        logs = [entry for entry in logs if entry.from_address in payers]
        proven = proofs.prove(client, conn, network.id, {entry.block_number for entry in logs})
        for entry in logs:
            if proven[entry.block_number][0].hash != entry.block_hash:
                raise NotProven(f"block {entry.block_number}: a log of another block than the kept"
                                " chain's")
        with db.transaction() as tx:
            completed += _complete_found(tx, network, logs, proven, now)
            refund_rows.advance(tx, network.id, last)
        first = last + 1
    return completed


def _logs(client, first, last, refunds, max_addresses, pins):
    """The Transfer logs in [first, last] of the refunds' tokens to their addresses, in chain order,
    each eth_getLogs in one batch with `pins` (canonical.transfer_logs)."""
    tokens = sorted({r.token_contract.lower() for r in refunds})
    recipients = sorted({r.address.lower() for r in refunds})
    logs = []
    for i in range(0, len(recipients), max_addresses):
        logs += canonical.transfer_logs(client, first, last, tokens,
                                        recipients[i:i + max_addresses], pins)
    return sorted(logs, key=lambda entry: (entry.block_number, entry.log_index))


def _complete_found(conn, network, logs, proven, now) -> int:
    """Complete, in the caller's transaction, the refunds that `logs` (proven, in chain order) pay,
    the pending refunds read again here (one cancelled or named meanwhile is left alone). A transfer
    pays only a refund of the one merchant its sender belongs to, and never one to its own sender
    (a payout address refunded to itself): a sender that is the payout (or
    deposit) address of several merchants (data from before set-payout refused that) settles
    nothing, and a transaction this merchant named for another of its refunds is left to that one;
    another merchant's name does not hold it back (its named path refuses the transfer)."""
    if not logs:
        return 0
    senders = refund_rows.payout_senders(conn, network.id)
    pending = refund_rows.pending_on(conn, network.id)
    reserved = {(r.merchant_id, r.named_tx_hash) for r in pending if r.named_tx_hash}
    candidates = [r for r in pending if senders.get(r.id)]
    owners = _owners(conn, logs)
    completed = 0
    for entry in logs:
        if refund_rows.transfer_used(conn, network.chain_id, entry.tx_hash, entry.log_index):
            continue
        header, anchor = proven[entry.block_number]
        fits = [r for r in candidates
                if entry.token == r.token_contract.lower() and entry.to_address == r.address.lower()
                and entry.from_address in senders[r.id] and entry.from_address != entry.to_address
                and entry.block_number > r.scanned_block
                and header.timestamp > r.created_at and entry.amount >= r.amount
                and (r.merchant_id, entry.tx_hash) not in reserved]
        if not fits:
            continue
        shared = owners.get(entry.from_address, set())
        if len(shared) > 1:
            log.warning("watch %s: transfer %s (log %d) settles no refund: its sender %s is the"
                        " payout or deposit address of %d merchants (%s); give each its own"
                        " (merchants set-payout)", network.id, entry.tx_hash, entry.log_index,
                        entry.from_address, len(shared), ", ".join(sorted(shared)))
            continue
        refund = next((r for r in fits if r.amount == entry.amount), fits[0])  # oldest first
        candidates.remove(refund)
        if refund_rows.complete(conn, refund.id, entry, to_checksum_address(entry.from_address),
                                header, anchor, now):
            emit(conn, "refund.completed", process_rows.get(conn, refund.process_id), now)
            completed += 1
    return completed
