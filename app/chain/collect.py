"""`collect`: moves what payout-mode deposit addresses hold on a network to their payout addresses,
through the network's forwarder factory, paying the gas from an operator's key file.

One run:
1. settles the collections of earlier runs; nothing is recorded that is not proven on the kept chain
   (app/evm/canonical.py), and the run stops when the node's chain is not the one the watcher
   last read (a reorganisation it has not read yet):
   - a confirmed one whose proof's anchor the kept chain lost is read again: if its block left the
     chain it is `reverted` (`pending` again when the node holds it again), and what it had moved is
     back at its addresses for step 2;
   - the pending ones, by sender and nonce: at most one transaction of a nonce is ever mined. Mined,
     a collection records what its logs show it moved and stays `pending` until deep enough
     (confirmations, or the network's finality tag) and proven (`confirmed`, with its anchor);
     reverted by the EVM, or its nonce used by another transaction, it is `reverted`. Not mined: one
     the node does not know is broadcast again from its stored signed form; one of this key in
     flight for longer than the receipt timeout, or that the node refuses, is replaced (the same
     nonce, higher fees): a transaction that never confirms never jams the key;
2. reads every deposit address's balances from the chain (each token asset of the network, any
   `extra_tokens`, and the gas coin), at one block, in JSON-RPC batches: every payout-mode address
   that this network's factory can empty, whatever network its payment chose (money sent on the
   wrong network sits at the same address here when the factory has the same address and version);
3. sends one factory call per batch of non-empty addresses: as many as fit in BLOCK_SHARE of the
   block gas limit by eth_estimateGas (sized from the estimates of 1 and PROBE addresses, at most
   `max_batch`), in even batches (`plan_batches`, pure); a batch the node finds too large is planned
   again, with the rest, at half its size. Each batch (`send_batch`) is recorded with its nonce
   (above every pending one of its sender: two runs at once never sign one nonce twice), hash and
   signed bytes before it is broadcast, its receipt awaited and what it moved recorded, `pending`
   until a later run confirms it.
Its items are the claim on its addresses: an address that a collection on the network includes is
left out by every run (whatever its key) while that collection is `pending`, and also when it was
confirmed in a block after the one this run read the balances at (the run's balances predate it).
Claims are checked when the balances are read and again under the network's collection lock, in the
transaction that records the batch (`payout_rows.held`): of two runs at once, the second sends
nothing for an address the first holds, and spends no gas on it.
What a collection moved is what its own transaction's logs show (never a balance difference across
its block, which other transactions change): each token's Transfer from a deposit address to its
payout, and the gas coin each forwarder of a version-2 factory logs. A first-release factory's
forwarders log nothing: the gas coin they move is not measured, and the collection's note says so.
The chain is the record of what is left: a run stopped anywhere leaves addresses that the next run
finds still holding their funds. Docs: docs/payments.md ("Collecting the funds").
"""
from dataclasses import dataclass, field

from app.chain import collection_records
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN, Collection, Item
from app.domain.setup import SetupError
from app.evm import forwarder, rpc
from app.evm.signer import GAS_MARGIN, ChainError, Sender, read_key_file

BALANCE_OF = "0x70a08231"  # balanceOf(address)
# A batch's transaction uses at most this share of the block gas limit: EIP-1559 aims blocks at half
# the limit, and a transaction much larger than that waits for a block with room for it.
BLOCK_SHARE = 0.5
MAX_BATCH = 500  # deposit addresses per transaction, whatever the gas allows
PROBE = 10  # addresses whose estimate sizes the first batch
READ_BATCH = 100  # calls per JSON-RPC batch when reading balances


@dataclass
class Batch:
    deposits: list  # of Deposit
    balances: dict  # address -> {token: amount}
    tokens: list
    gas: int = 0  # estimated
    collection: Collection | None = None
    moved: list = field(default_factory=list)  # Items its logs show moved, once mined


@dataclass
class Report:
    network_id: str
    sender: str
    dry_run: bool
    confirmations: int = 0
    finality: str = "confirmations"  # or "safe", "finalized": the network's (canonical.deep_enough)
    settled: list = field(default_factory=list)  # (Collection, items) of earlier runs settled now
    replaced: list = field(default_factory=list)  # (tx hash, its replacement's, why)
    batches: list = field(default_factory=list)
    max_fee_per_gas: int = 0
    head: int | None = None
    read_block: int | None = None  # the block the deposit balances were read at
    held: set = field(default_factory=set)  # addresses left out: another collection holds them
    deep_enough: int = -1  # the highest block whose collections count (canonical.deep_enough)
    kept_top: int | None = None  # the watcher's newest kept block: nothing above it is proven
    error: str | None = None


def collect(db, network_id, key_file, *, merchant_id=None, dry_run=False, max_batch=MAX_BATCH,
            extra_tokens=(), now, client_factory=rpc.Client, receipt_timeout=120,
            stopping=lambda: False) -> Report:
    """One collection run (see the module's docstring). SetupError for what the operator must fix
    before anything is read; otherwise a Report whose `error` says why the run stopped early, if it
    did (exit status != 0): what it lists as moved did move. `stopping()` true (SIGTERM/SIGINT): the
    transaction in flight is awaited and recorded, no other is sent."""
    account = read_key_file(key_file)  # SignerError
    conn = db.connection()
    network = payment_rows.get_network(conn, network_id)
    if network is None:
        raise SetupError(f"No network {network_id}.")
    found = payout_rows.factory_of(conn, network_id)
    if found is None:
        raise SetupError(f"Network {network_id} has no forwarder factory: networks deploy-factory"
                         " or set-factory first.")
    factory, version = found
    tokens = [a.contract for a in payment_rows.list_assets(conn) if a.network_id == network_id]
    for token in extra_tokens:
        if token not in tokens:
            tokens.append(token)
    sender = Sender(client_factory(network.rpc_url), network.chain_id, account,
                    max_fee_per_gas=network.max_fee_per_gas)
    report = Report(network_id=network_id, sender=sender.address, dry_run=dry_run,
                    confirmations=network.confirmations, finality=network.finality)
    try:
        sender.check_chain()
        collection_records.settle_earlier(db, sender, network, version, report,
                                          may_send=not dry_run, now=now, timeout=receipt_timeout)
        deposits = payout_rows.collectable(db.connection(), factory, version, merchant_id)
        report.read_block, balances = _balances(sender.client, deposits, tokens)
        full = [d for d in deposits if any(balances[d.address].values())]
        report.held = payout_rows.held(db.connection(), network_id, [d.address for d in full],
                                       report.read_block, now)
        full = [d for d in full if d.address not in report.held]
        if full:
            _send_batches(db, sender, network, (factory, version), full, balances, report,
                          dry_run=dry_run, max_batch=max_batch, now=now, timeout=receipt_timeout,
                          stopping=stopping)
    except ChainError as e:
        report.error = str(e)
    except rpc.RpcError as e:
        report.error = f"The node did not answer as expected: {e}"
    return report


# --- 2. balances -----------------------------------------------------------------------------

def _balances(client, deposits, tokens) -> tuple[int | None, dict]:
    """(block number, {address: {token or GAS_COIN: amount}}) of every deposit, read at one block:
    the first batch at "latest" with the node's eth_blockNumber (one node answers both: no lone
    call, whose number another node of the pool may not have), the next ones at that number (None
    when there is nothing to read)."""
    keys = [(d.address, token) for d in deposits for token in (GAS_COIN, *tokens)]
    found = {d.address: {} for d in deposits}
    block, i = "latest", 0
    while i < len(keys):
        chunk = keys[i:i + READ_BATCH - (block == "latest")]
        calls = [_balance_call(address, token, block) for address, token in chunk]
        if block == "latest":
            number, *results = client.batch([("eth_blockNumber", [])] + calls)
            block = hex(rpc.quantity(number, "eth_blockNumber"))
        else:
            results = client.batch(calls)
        for (address, token), value in zip(chunk, results, strict=True):
            found[address][token] = (rpc.quantity(value, "eth_getBalance") if token == GAS_COIN
                                      else rpc.word(value, "balanceOf"))
        i += len(chunk)
    return (None if block == "latest" else int(block, 16)), found


def _balance_call(address, token, block):
    if token == GAS_COIN:
        return "eth_getBalance", [address, block]
    data = BALANCE_OF + address[2:].lower().rjust(64, "0")
    return "eth_call", [{"to": token, "data": data}, block]


# --- 3. batches ------------------------------------------------------------------------------

def _calldata(batch):
    return forwarder.collect_calldata(
        batch.tokens, [(d.payout_address, forwarder.salt(d.process_id)) for d in batch.deposits])


def _batch(deposits, balances, all_tokens):
    held = {t for d in deposits for t, amount in balances[d.address].items()
            if amount and t != GAS_COIN}
    return Batch(deposits=deposits, balances={d.address: balances[d.address] for d in deposits},
                 tokens=[t for t in all_tokens if t in held])


def plan_batches(start, stop, size) -> list[range]:
    """The addresses start..stop-1 in as few batches as batches of at most `size` would make, their
    sizes differing by one at most (101 by 100: 51 and 50, not 100 and 1), as ranges of indexes."""
    count = stop - start
    batches = (count + size - 1) // size
    if batches == 0:
        return []
    small, larger = divmod(count, batches)  # the first `larger` batches hold one more
    plan, first = [], start
    for n in range(batches):
        length = small + (n < larger)
        plan.append(range(first, first + length))
        first += length
    return plan


def _estimate(sender, factory, batch, budget):
    """The batch's gas estimate, or None when it is over `budget` or the node refuses it as too
    large for a block."""
    try:
        gas = sender.estimate(factory, _calldata(batch))
    except rpc.RpcError as e:
        if len(batch.deposits) > 1 and "gas" in str(e).lower():
            return None
        raise ChainError(f"The factory call would fail: {e}") from None
    return gas if gas * GAS_MARGIN <= budget or len(batch.deposits) == 1 else None


def _first_size(sender, factory, full, balances, tokens, budget, max_batch) -> int:
    """Addresses a batch may hold, from two small estimates (1 and PROBE addresses): no estimate
    of a batch far too large is ever asked."""
    size = max(1, min(max_batch, len(full)))
    if size > PROBE:
        one = _estimate(sender, factory, _batch(full[:1], balances, tokens), budget)
        few = _estimate(sender, factory, _batch(full[:PROBE], balances, tokens), budget)
        if one is not None and few is not None and few > one:
            per_address = (few - one) / (PROBE - 1)  # the call's fixed cost counted once
            fits = int((budget / GAS_MARGIN - (one - per_address)) / per_address)
            size = max(PROBE, min(size, fits))
    return size


def _send_batches(db, sender, network, factory, full, balances, report, *, dry_run, max_batch, now,
                  timeout, stopping):
    """Step 3, batch after batch as planned; a batch the node finds too large is planned again, with
    the rest, at half its size. `factory` is (address, version)."""
    tokens = sorted({t for b in balances.values() for t, a in b.items() if a and t != GAS_COIN})
    budget = int(sender.block_gas_limit() * BLOCK_SHARE)
    plan = plan_batches(0, len(full), _first_size(sender, factory[0], full, balances, tokens,
                                                  budget, max_batch))
    while plan:
        if stopping():
            raise ChainError(f"Stopped (SIGTERM/SIGINT) with {len(full) - plan[0].start}"
                             " address(es) not collected: run collect again for them.")
        part = plan.pop(0)
        batch = _batch(full[part.start:part.stop], balances, tokens)
        batch.gas = _estimate(sender, factory[0], batch, budget)
        if batch.gas is None:
            plan = plan_batches(part.start, len(full), max(1, len(part) // 2))
            continue
        report.batches.append(batch)
        try:
            send_batch(db, sender, network, factory, batch, report, dry_run=dry_run, now=now,
                       timeout=timeout)
        except Held as e:  # another run claimed some of them since the balances were read
            report.batches.pop()
            report.held |= e.addresses
            full[part.start:] = [d for d in full[part.start:] if d.address not in e.addresses]
            plan = plan_batches(part.start, len(full), len(part))


class Held(Exception):
    """Some of a batch's addresses are held by another collection (`payout_rows.held`): the batch
    is not sent; they are left out and the rest planned again."""

    def __init__(self, addresses):
        super().__init__(f"{len(addresses)} address(es) held by another collection")
        self.addresses = addresses


def send_batch(db, sender, network, factory, batch, report, *, dry_run, now, timeout):
    """One batch's factory call, at the node's fees: ChainError when the key's account cannot pay
    for it. Unless `dry_run`: signed, recorded, broadcast, and what its receipt shows it moved
    recorded."""
    fees = sender.fees()
    report.max_fee_per_gas = fees.max_fee_per_gas
    gas_limit = int(batch.gas * GAS_MARGIN)
    cost = gas_limit * fees.max_fee_per_gas
    balance = sender.balance()
    if balance < cost:
        raise ChainError(
            f"The key's account {sender.address} holds {balance} wei, less than the {cost} wei"
            f" ({gas_limit} gas at up to {fees.max_fee_per_gas} wei) the next transaction may"
            f" cost: send it some of {network.name}'s gas coin. Nothing more was sent.")
    if not dry_run:
        _send(db, sender, network, factory, batch, gas_limit, fees, report, now, timeout)


def _send(db, sender, network, factory, batch, gas_limit, fees, report, now, timeout):
    """Sign, record, broadcast one batch's call and record what its receipt shows it moved."""
    address, version = factory
    planned = [Item(0, d.address, token, d.process_id, d.merchant_id, d.payout_address, amount)
               for d in batch.deposits for token, amount in batch.balances[d.address].items()
               if amount]
    counted = sender.nonce()  # the node's count, pending transactions included
    with db.transaction() as conn:  # its nonce chosen, its addresses claimed, and it recorded,
        # before it is broadcast
        payout_rows.lock_collections(conn, network.id)
        taken = payout_rows.held(conn, network.id, [d.address for d in batch.deposits],
                                 report.read_block, now)
        if taken:
            raise Held(taken)
        highest = payout_rows.highest_open_nonce(conn, network.id, sender.address)
        nonce = counted if highest is None else max(counted, highest + 1)
        signed = sender.sign(to=address, data=_calldata(batch), gas_limit=gas_limit, fees=fees,
                             nonce=nonce)
        collection_id = payout_rows.insert_collection(conn, Collection(
            id=0, network_id=network.id, chain_id=network.chain_id, factory=address,
            sender=sender.address, nonce=nonce, tx_hash=signed.tx_hash, raw_tx=signed.raw,
            gas_limit=gas_limit, max_fee_per_gas=fees.max_fee_per_gas, status="pending",
            block_number=None, gas_used=None, gas_price=None, error=None, created_at=int(now),
            settled_at=None), planned)
    batch.collection = payout_rows.get_collection(db.connection(), collection_id)
    try:
        sender.broadcast(signed.raw)
    except rpc.RpcError as e:
        if e.code is None:
            raise  # unreachable: it may have gone out; the next run settles it
        with db.transaction() as conn:
            payout_rows.revert(conn, collection_id, "pending", f"refused by the node: {e}",
                               int(now))
        batch.collection = payout_rows.get_collection(db.connection(), collection_id)
        raise ChainError(f"The node refused the collection {signed.tx_hash}: {e}") from None
    receipt = sender.wait(signed.tx_hash, timeout)
    if receipt is None:
        raise ChainError(f"The collection {signed.tx_hash} was sent but not mined within"
                         f" {timeout} s: the next run settles it from its receipt.")
    report.head = max(report.head or 0, receipt.block_number)  # shown: the node's head is there
    batch.moved = collection_records.record_receipt(db, sender, network, version, batch.collection,
                                                    receipt, report, now)
    batch.collection = payout_rows.get_collection(db.connection(), collection_id)
    if batch.collection.status == "reverted":
        raise ChainError(f"The collection {signed.tx_hash} reverted (block"
                         f" {receipt.block_number}): nothing in it moved.")
