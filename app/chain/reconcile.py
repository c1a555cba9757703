"""`reconcile NETWORK_ID`: the books checked against the chain (docs/contract.md, "Books that prove
themselves"). Read-only: the database is read in one read-only snapshot (db.snapshot()), then the
chain, then the two are compared in memory.

What is read from the chain, in blocks [from, to] (every batch pinned to the chain id and the
`to` block's header, so one node's chain answers for all of it):
- every ERC-20 Transfer log to a deposit address of the network's mode, of any contract (the
  watcher's address-filtered eth_getLogs, chunks of addresses batched);
- the receipt of every completed refund's and confirmed collection's transaction in the range;
- the gas-coin balance of every payout-mode deposit address at `to` (no log records the gas coin:
  what is there is money the books do not hold until `collect` moves it).
Three lists come out, each item naming the process, refund or collection and the transaction:
1. recorded but not on the chain, or with another token, recipient, amount or block hash: paying
   and unexpected transfers, refunds' settling transfers, what confirmed collections moved;
2. on the chain but not recorded (a Transfer to a deposit address with no paying or unexpected
   row still counted; a gas-coin balance at a payout-mode deposit address);
3. states the records do not support, counting only records the chain confirmed (or outside the
   range): a process completed by its payment with less confirmed and accepted money than its
   amount due less its tolerance (one completed by hand, `processes complete` or a sandbox
   payment, is supported by that record), a completed refund without its transfer, a confirmed
   collection without its transaction.

Defaults: `to` is the highest block the watcher has read that is final by the network's rule
(its confirmations, or the tag block it last read); `from` is the first block stamped at or after
the first deposit address of the mode was handed out (a network added with a start block past a
payment is read from before it), or the network's start block when it is earlier.
"""
import time
from collections import defaultdict
from dataclasses import dataclass, field

from app.chain import collection_records
from app.core.money import minimum_paid
from app.data import books
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN
from app.domain import rates
from app.domain.setup import SetupError
from app.evm import canonical, rpc
from app.evm.logs import transfer_logs_by_chunks
from app.evm.pins import Pins
from app.evm.rpc import TAGS

CHUNK = 500  # deposit addresses per eth_getLogs
RECEIPTS_PER_BATCH = 100
BALANCES_PER_BATCH = 500
CLOCK_MARGIN = 3600  # seconds before the first payment that `from` reaches back (clocks differ)


@dataclass
class Finding:
    """One item of a list: what is at odds, and where."""
    kind: str  # transfer, unexpected transfer, refund, collection, process, gas coin
    reason: str
    process_id: str | None = None
    refund_id: str | None = None
    collection_id: int | None = None
    tx_hash: str | None = None
    log_index: int | None = None
    block_number: int | None = None
    token: str | None = None
    amount: int | None = None  # base units
    address: str | None = None

    def as_json(self) -> dict:
        return {"kind": self.kind, "processId": self.process_id, "refundId": self.refund_id,
                "collectionId": self.collection_id, "txHash": self.tx_hash,
                "logIndex": self.log_index, "blockNumber": self.block_number, "token": self.token,
                "amount": None if self.amount is None else str(self.amount),
                "address": self.address, "reason": self.reason}


@dataclass
class Report:
    network_id: str
    chain_id: int
    from_block: int
    to_block: int
    not_on_chain: list = field(default_factory=list)
    not_recorded: list = field(default_factory=list)
    unsupported: list = field(default_factory=list)
    checked: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)  # database, chain, compare

    @property
    def clean(self) -> bool:
        return not (self.not_on_chain or self.not_recorded or self.unsupported)


@dataclass
class _Books:
    """What the snapshot read."""
    network: object
    assets: dict
    deposits: dict  # address -> (process id, mode)
    first_payment_at: int | None
    transfers: list
    unexpected: list
    refunds: list
    collections: list
    items: dict  # collection id -> [Item]
    payout_deposits: dict  # (factory, address) -> Deposit
    factory: tuple | None
    completed: list  # books.completed_on's rows
    views: dict  # process id -> PaymentView, of the completed processes whose money is mixed


def reconcile(db, network_id, *, from_block=None, to_block=None, max_range=None,
              client_factory=rpc.Client) -> Report:
    """The three lists for the network (SetupError for a bad network or range; RpcError when the
    node cannot be read: nothing is concluded then)."""
    started = time.perf_counter()
    books_ = _read_books(db, network_id)
    network = books_.network
    read = time.perf_counter()
    client = client_factory(network.rpc_url)
    first, last = _range(client, network, books_, from_block, to_block)
    report = Report(network.id, network.chain_id, first, last)
    chain = _read_chain(client, network, books_, first, last, max_range)
    fetched = time.perf_counter()
    _compare(report, books_, chain)
    report.seconds = {"database": round(read - started, 3), "chain": round(fetched - read, 3),
                      "compare": round(time.perf_counter() - fetched, 3)}
    return report


# --- the books -------------------------------------------------------------------------------

def _read_books(db, network_id) -> _Books:
    with db.snapshot() as conn:
        network = payment_rows.get_network(conn, network_id)
        if network is None:
            raise SetupError(f"No network {network_id}.")
        livemode = not network.is_test
        collections = books.confirmed_collections_on(conn, network.id)
        completed = books.completed_on(conn, network.id)
        views = {}
        mixed = [row[0] for row in completed if row[5]]
        for i in range(0, len(mixed), 1000):
            views.update(payment_rows.views_of(conn, mixed[i:i + 1000]))
        return _Books(
            network=network,
            assets={a.contract.lower(): a for a in payment_rows.list_assets(conn)
                    if a.network_id == network.id},
            deposits=books.deposit_addresses(conn, livemode),
            first_payment_at=books.first_payment_at(conn, livemode),
            transfers=books.transfers_on(conn, network.id),
            unexpected=books.unexpected_on(conn, network.id),
            refunds=books.completed_refunds_on(conn, network.id),
            collections=collections,
            items=payout_rows.items_of(conn, [c.id for c in collections]),
            payout_deposits=books.payout_deposits(conn),
            factory=payout_rows.factory_of(conn, network.id),
            completed=completed, views=views)


# --- the chain -------------------------------------------------------------------------------

def _range(client, network, books_, from_block, to_block) -> tuple[int, int]:
    head = client.block_number()
    if to_block is None:
        final = (network.tag_block if network.finality in TAGS
                 else network.head_block - network.confirmations + 1)
        to_block = min(network.scanned_block, final if final is not None else -1)
    if to_block > head:
        raise SetupError(f"Block {to_block} is above the node's head {head}.")
    if from_block is None:
        from_block = network.start_block
        if books_.first_payment_at is not None:
            from_block = min(from_block, _first_block_at(
                client, books_.first_payment_at - CLOCK_MARGIN, max(to_block, 0)))
    if to_block < 0 or from_block > to_block:
        raise SetupError(f"Nothing to read: from block {from_block} to block {to_block} (the"
                         " watcher has read no final block yet, or --from-block is above"
                         " --to-block).")
    return from_block, to_block


def _first_block_at(client, timestamp, high) -> int:
    """The first block at or below `high` stamped at or after `timestamp` (a binary search over
    headers: about log2(high) calls); `high` when none is."""
    low = 0
    while low < high:
        middle = (low + high) // 2
        header = client.header(middle)
        if header is None:
            raise rpc.RpcError(f"the node has no block {middle}")
        if header.timestamp >= timestamp:
            high = middle
        else:
            low = middle + 1
    return low


@dataclass
class _Chain:
    logs: dict  # (tx hash, log index) -> logs.Log, Transfers to deposit addresses
    receipts: dict  # tx hash -> canonical.Receipt or None
    coins: dict  # payout-mode deposit address -> wei held at `to`


def _read_chain(client, network, books_, first, last, max_range) -> _Chain:
    pins = Pins(network.chain_id, {last: None})
    addresses = sorted(books_.deposits)
    chunks = [addresses[i:i + CHUNK] for i in range(0, len(addresses), CHUNK)]
    logs = {}
    step = max_range or (last - first + 1)
    for start in range(first, last + 1, step):
        end = min(last, start + step - 1)
        for entry in transfer_logs_by_chunks(client, start, end, chunks, pins=pins,
                                             strict=set(books_.assets)):
            if entry.amount > 0 and entry.to_address in books_.deposits:
                logs[(entry.tx_hash, entry.log_index)] = entry
    hashes = list(dict.fromkeys(
        [r.tx_hash for r in books_.refunds if r.tx_hash and _within(r.block_number, first, last)]
        + [c.tx_hash for c in books_.collections if _within(c.block_number, first, last)]))
    receipts = {}
    for i in range(0, len(hashes), RECEIPTS_PER_BATCH):
        chunk = hashes[i:i + RECEIPTS_PER_BATCH]
        answers = client.pinned([("eth_getTransactionReceipt", [h]) for h in chunk], pins)
        receipts.update((h, canonical.receipt(value, h)) for h, value
                        in zip(chunk, answers, strict=True))
    payout = [a for a, (_, mode) in sorted(books_.deposits.items()) if mode == "payout"]
    coins = {}
    for i in range(0, len(payout), BALANCES_PER_BATCH):
        chunk = payout[i:i + BALANCES_PER_BATCH]
        answers = client.pinned([("eth_getBalance", [a, hex(last)]) for a in chunk], pins)
        coins.update((a, rpc.quantity(v, "eth_getBalance")) for a, v
                     in zip(chunk, answers, strict=True))
    return _Chain(logs, receipts, coins)


def _within(block, first, last) -> bool:
    return block is not None and first <= block <= last


# --- the comparison --------------------------------------------------------------------------

def _compare(report, books_, chain):
    first, last = report.from_block, report.to_block
    bad = set()  # (tx hash, log index) of records the chain does not confirm
    counted = set()  # chain logs a record accounts for
    address_of = {process_id: address for address, (process_id, _) in books_.deposits.items()}
    for kind, records in (("transfer", books_.transfers),
                          ("unexpected transfer", books_.unexpected)):
        for t in records:
            if t.status not in ("seen", "confirmed") or not first <= t.block_number <= last:
                continue
            key = (t.tx_hash, t.log_index)
            why = _differs(t, chain.logs.get(key), address_of.get(t.process_id))
            if why is None:
                counted.add(key)
                continue
            bad.add(key)
            report.not_on_chain.append(Finding(
                kind, why, process_id=t.process_id, tx_hash=t.tx_hash, log_index=t.log_index,
                block_number=t.block_number, token=t.token_contract, amount=t.amount))
    recorded_elsewhere = {(t.tx_hash, t.log_index): t.status
                          for t in books_.transfers + books_.unexpected}
    for key, entry in sorted(chain.logs.items(), key=lambda kv: (kv[1].block_number, kv[0][1])):
        if key in counted or key in bad:  # a wrong record of it is in the first list
            continue
        state = recorded_elsewhere.get(key)
        why = ("not recorded" if state is None or state in ("seen", "confirmed")
               else f"recorded as {state} (no longer counted)")
        report.not_recorded.append(Finding(
            "transfer", why, process_id=books_.deposits[entry.to_address][0],
            tx_hash=entry.tx_hash, log_index=entry.log_index, block_number=entry.block_number,
            token=entry.token, amount=entry.amount, address=entry.to_address))
    for address, wei in chain.coins.items():
        if wei:
            report.not_recorded.append(Finding(
                "gas coin", f"{wei} wei of the gas coin held at block {last}: recorded once"
                " collect moves it", process_id=books_.deposits[address][0], token=GAS_COIN,
                amount=wei, address=address))
    _refunds(report, books_, chain)
    _collections(report, books_, chain)
    _processes(report, books_, bad)
    report.checked = {
        "transfersOnChain": len(chain.logs), "transfersRecorded": len(counted) + len(bad),
        "refunds": sum(_within(r.block_number, first, last) for r in books_.refunds),
        "collections": sum(_within(c.block_number, first, last) for c in books_.collections),
        "completedProcesses": len(books_.completed), "payoutAddresses": len(chain.coins)}


def _differs(t, entry, to) -> str | None:
    """Why the recorded transfer `t` to the deposit address `to` is not the chain's `entry`
    (None: it is)."""
    if entry is None:
        return "not on the chain"
    if entry.block_hash != t.block_hash.lower() or entry.block_number != t.block_number:
        return f"on the chain in block {entry.block_number} {entry.block_hash}, not {t.block_hash}"
    if (entry.token, entry.to_address) != (t.token_contract.lower(), to):
        return f"on the chain a transfer of {entry.token} to {entry.to_address}"
    if entry.amount != t.amount:
        return f"on the chain {entry.amount} base units, not {t.amount}"
    return None


def _refunds(report, books_, chain):
    first, last = report.from_block, report.to_block
    for r in books_.refunds:
        if r.tx_hash is None or r.transfer_amount is None or r.log_index is None:
            report.unsupported.append(Finding(
                "refund", "completed without its transfer", process_id=r.process_id,
                refund_id=r.id, tx_hash=r.tx_hash))
            continue
        if r.transfer_amount < r.amount:
            report.unsupported.append(Finding(
                "refund", f"completed by a transfer of {r.transfer_amount} base units, less than"
                f" its {r.amount}", process_id=r.process_id, refund_id=r.id, tx_hash=r.tx_hash))
        if not _within(r.block_number, first, last):
            continue
        why = _refund_differs(r, chain.receipts.get(r.tx_hash))
        if why is not None:
            found = Finding("refund", why, process_id=r.process_id, refund_id=r.id,
                            tx_hash=r.tx_hash, log_index=r.log_index, block_number=r.block_number,
                            token=r.token_contract, amount=r.transfer_amount, address=r.address)
            report.not_on_chain.append(found)
            report.unsupported.append(Finding(
                "refund", "completed without its transfer on the chain", process_id=r.process_id,
                refund_id=r.id, tx_hash=r.tx_hash))


def _refund_differs(r, receipt) -> str | None:
    if receipt is None:
        return "its transaction is not on the chain"
    if receipt.status != 1:
        return "its transaction reverted on the chain"
    if receipt.block_hash != (r.block_hash or "").lower():
        return f"its transaction is in block {receipt.block_number} {receipt.block_hash}"
    for raw in receipt.logs:
        if raw.get("logIndex") == hex(r.log_index):
            entry = canonical.transfer_log(raw)
            if (entry is not None and entry.token == r.token_contract.lower()
                    and entry.to_address == r.address.lower()
                    and entry.amount == r.transfer_amount):
                return None
            return f"its log {r.log_index} is not that transfer of {r.transfer_amount} base units"
    return f"its transaction has no log {r.log_index}"


def _collections(report, books_, chain):
    first, last = report.from_block, report.to_block
    for c in books_.collections:
        if c.block_number is None or c.block_hash is None:
            report.unsupported.append(Finding(
                "collection", "confirmed without its transaction in a block",
                collection_id=c.id, tx_hash=c.tx_hash))
            continue
        if not _within(c.block_number, first, last):
            continue
        receipt = chain.receipts.get(c.tx_hash)
        recorded = _totals(books_.items.get(c.id, []))
        if receipt is None or receipt.status != 1 or receipt.block_hash != c.block_hash.lower():
            why = ("its transaction is not on the chain" if receipt is None
                   else "its transaction reverted on the chain" if receipt.status != 1
                   else f"its transaction is in block {receipt.block_number} {receipt.block_hash}")
            for (address, token), amount in sorted(recorded.items()):
                report.not_on_chain.append(Finding(
                    "collection", why, collection_id=c.id, tx_hash=c.tx_hash,
                    block_number=c.block_number, token=token, amount=amount, address=address))
            report.unsupported.append(Finding(
                "collection", "confirmed without its transaction on the chain",
                collection_id=c.id, tx_hash=c.tx_hash, block_number=c.block_number))
            continue
        version = (books_.factory[1] if books_.factory and books_.factory[0] == c.factory else 1)
        moved = _totals(collection_records.moved_from(
            c, receipt, version, lambda addresses, f=c.factory: {
                a: books_.payout_deposits[(f, a)] for a in addresses
                if (f, a) in books_.payout_deposits}))
        for key in sorted(set(recorded) | set(moved)):
            if recorded.get(key, 0) != moved.get(key, 0):
                report.not_on_chain.append(Finding(
                    "collection", f"recorded {recorded.get(key, 0)} base units moved, the"
                    f" transaction's logs show {moved.get(key, 0)}", collection_id=c.id,
                    tx_hash=c.tx_hash, block_number=c.block_number, token=key[1],
                    amount=recorded.get(key, 0), address=key[0]))


def _totals(items) -> dict:
    totals = defaultdict(int)
    for i in items:
        totals[(i.address, i.token.lower())] += i.amount
    return dict(totals)


def _processes(report, books_, bad):
    """The completed processes' money against their due: from the network's transfers already
    read (their token on this network: summed as recorded), or the payment's view when some of it
    is elsewhere (`mixed`: another network or token, rescaled; accepted unexpected transfers)."""
    simple = defaultdict(int)
    for t in books_.transfers:
        if t.status == "confirmed" and (t.tx_hash, t.log_index) not in bad:
            simple[t.process_id] += t.amount
    for process_id, completed_by, due, tolerance, token, mixed, priced in books_.completed:
        if completed_by in ("operator", "sandbox"):
            continue  # supported by that record
        wrong = rates.quote_problem(*priced, due)
        if wrong:
            report.unsupported.append(Finding(
                "process", f"due {due} base units, which its quote does not give: {wrong}",
                process_id=process_id, token=token, amount=due))
        if mixed:
            paid = sum(t.amount for t in books_.views[process_id].transfers
                       if t.status == "confirmed" and (t.tx_hash, t.log_index) not in bad)
        else:
            paid = simple[process_id]
        if paid >= minimum_paid(due, tolerance):
            continue
        how = "" if completed_by else " (completed before completions were recorded: by hand?)"
        report.unsupported.append(Finding(
            "process", f"completed with {paid} base units confirmed and accepted, less than the"
            f" {due} due (tolerance {tolerance} %){how}", process_id=process_id, token=token,
            amount=paid))
