"""`collect`: moves what payout-mode deposit addresses hold on a network to their payout addresses,
through the network's forwarder factory, paying the gas from an operator's key file.

One run:
1. settles the collections an earlier run left `sent` (killed, node down, receipt not in time):
   by their receipt; one the node does not know is broadcast again from its stored signed form,
   or marked failed when its nonce was used by another transaction;
2. reads every deposit address's balances from the chain (each token asset of the network, any
   `extra_tokens`, and the gas coin), at one block, in JSON-RPC batches;
3. sends one factory call per batch of non-empty addresses: as many as fit in BLOCK_SHARE of the
   block gas limit by eth_estimateGas (sized from the estimates of 1 and PROBE addresses, halved until
   they fit; at most `max_batch`), each recorded
   with its hash and signed bytes before it is broadcast, its receipt awaited, and only then its
   items recorded as collected, with the amounts its logs show moved.
The chain is the record of what is left: a run stopped anywhere leaves addresses that the next run
finds still holding their funds. Docs: docs/payments.md ("Collecting the funds").
"""
from collections import defaultdict
from dataclasses import dataclass, field

from app.chain import forwarder, rpc
from app.chain.signer import GAS_MARGIN, ChainError, Sender, read_key_file
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data.payouts import GAS_COIN, Collection, Item
from app.payments import SetupError

BALANCE_OF = "0x70a08231"  # balanceOf(address)
TRANSFER_TOPIC = rpc.TRANSFER_TOPIC
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
    moved: list = field(default_factory=list)  # Items, once succeeded


@dataclass
class Report:
    network_id: str
    sender: str
    dry_run: bool
    settled: list = field(default_factory=list)  # (Collection, items) of earlier runs settled now
    batches: list = field(default_factory=list)
    max_fee_per_gas: int = 0
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
    factory = payout_rows.get_factory(conn, network_id)
    if factory is None:
        raise SetupError(f"Network {network_id} has no forwarder factory: networks deploy-factory"
                         " or set-factory first.")
    tokens = [a.contract for a in payment_rows.list_assets(conn) if a.network_id == network_id]
    for token in extra_tokens:
        if token not in tokens:
            tokens.append(token)
    sender = Sender(client_factory(network.rpc_url), network.chain_id, account)
    report = Report(network_id=network_id, sender=sender.address, dry_run=dry_run)
    try:
        sender.check_chain()
        _settle_earlier(db, sender, network_id, report, may_send=not dry_run, now=now,
                        timeout=receipt_timeout)
        deposits = payout_rows.deposits(db.connection(), network_id, factory, merchant_id)
        balances = _balances(sender.client, deposits, tokens)
        full = [d for d in deposits if any(balances[d.address].values())]
        if full:
            _send_batches(db, sender, network, factory, full, balances, report, dry_run=dry_run,
                          max_batch=max_batch, now=now, timeout=receipt_timeout, stopping=stopping)
    except ChainError as e:
        report.error = str(e)
    except rpc.RpcError as e:
        report.error = f"The node did not answer as expected: {e}"
    return report


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


def waiting(db, network_id, merchant_id, *, max_batch=100, client_factory=rpc.Client) -> Waiting:
    """Read the merchant's deposit balances on the network from its node (RpcError when it cannot).
    At most `max_batch` addresses go in the call: a wallet estimates its gas, without the CLI's
    halving, so the batch stays well below a block."""
    conn = db.connection()
    network = payment_rows.get_network(conn, network_id)
    factory = payout_rows.get_factory(conn, network_id)
    if network is None or factory is None:
        raise SetupError(f"Network {network_id} has no forwarder factory.")
    tokens = [a.contract for a in payment_rows.list_assets(conn) if a.network_id == network_id]
    deposits = payout_rows.deposits(conn, network_id, factory, merchant_id)
    balances = _balances(client_factory(network.rpc_url), deposits, tokens) if deposits else {}
    full = [d for d in deposits if any(balances[d.address].values())]
    totals = defaultdict(int)
    for d in full:
        for token, amount in balances[d.address].items():
            totals[token] += amount
    if not full:
        return Waiting(factory=factory, deposits=[], totals={}, calldata=None)
    batch = _batch(full[:max_batch], balances, tokens)
    return Waiting(factory=factory, deposits=full, totals=dict(totals),
                   calldata="0x" + _calldata(batch).hex(), batch=len(batch.deposits))


# --- 1. earlier runs -------------------------------------------------------------------------

def _settle_earlier(db, sender, network_id, report, *, may_send, now, timeout):
    for c in payout_rows.open_collections(db.connection(), network_id):
        receipt = sender.receipt(c.tx_hash)
        if receipt is None and may_send:
            if not sender.known(c.tx_hash):
                used = rpc.quantity(sender.client.call("eth_getTransactionCount", [c.sender, "latest"]),
                                    "eth_getTransactionCount")
                if used > c.nonce:  # another transaction of the sender took its nonce
                    _record_outcome(db, sender, c, None, now, report.settled,
                                    error="never mined: its nonce was used by another transaction")
                    continue
                sender.broadcast(c.raw_tx)
            receipt = sender.wait(c.tx_hash, timeout)
        if receipt is None:
            if may_send:
                raise ChainError(f"The collection {c.tx_hash} (nonce {c.nonce}) is still not mined:"
                                 " nothing more is sent until it is (run collect again later).")
            continue  # a dry run reads, never sends: it lists what is open
        _record_outcome(db, sender, c, receipt, now, report.settled)


# --- 2. balances -----------------------------------------------------------------------------

def _balances(client, deposits, tokens) -> dict:
    """{address: {token or GAS_COIN: amount}} of every deposit, read at one block."""
    block = hex(client.block_number())
    calls, keys = [], []
    for d in deposits:
        calls.append(("eth_getBalance", [d.address, block]))
        keys.append((d.address, GAS_COIN))
        for token in tokens:
            data = BALANCE_OF + d.address[2:].lower().rjust(64, "0")
            calls.append(("eth_call", [{"to": token, "data": data}, block]))
            keys.append((d.address, token))
    found = {d.address: {} for d in deposits}
    for i in range(0, len(calls), READ_BATCH):
        results = client.batch(calls[i:i + READ_BATCH])
        for (address, token), value in zip(keys[i:i + READ_BATCH], results):
            found[address][token] = (rpc.quantity(value, "eth_getBalance") if token == GAS_COIN
                                      else rpc.word(value, "balanceOf"))
    return found


# --- 3. batches ------------------------------------------------------------------------------

def _calldata(batch):
    return forwarder.collect_calldata(
        batch.tokens, [(d.payout_address, forwarder.salt(d.process_id)) for d in batch.deposits])


def _batch(deposits, balances, all_tokens):
    held = {t for d in deposits for t, amount in balances[d.address].items() if amount and t != GAS_COIN}
    return Batch(deposits=deposits, balances={d.address: balances[d.address] for d in deposits},
                 tokens=[t for t in all_tokens if t in held])


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


def _send_batches(db, sender, network, factory, full, balances, report, *, dry_run, max_batch, now,
                  timeout, stopping):
    tokens = sorted({t for b in balances.values() for t, a in b.items() if a and t != GAS_COIN})
    budget = int(sender.block_gas_limit() * BLOCK_SHARE)
    size = max(1, min(max_batch, len(full)))
    if size > PROBE:  # sized from two small estimates: no estimate of a batch far too large
        one = _estimate(sender, factory, _batch(full[:1], balances, tokens), budget)
        few = _estimate(sender, factory, _batch(full[:PROBE], balances, tokens), budget)
        if one is not None and few is not None and few > one:
            per_address = (few - one) / (PROBE - 1)  # the call's fixed cost counted once
            fits = int((budget / GAS_MARGIN - (one - per_address)) / per_address)
            size = max(PROBE, min(size, fits))
    size = -(-len(full) // -(-len(full) // size))  # as many batches, of even sizes
    start = 0
    while start < len(full):
        if stopping():
            raise ChainError(f"Stopped (SIGTERM/SIGINT) with {len(full) - start} address(es) not collected:"
                             " run collect again for them.")
        batch = _batch(full[start:start + size], balances, tokens)
        gas = _estimate(sender, factory, batch, budget)
        if gas is None:
            size = max(1, len(batch.deposits) // 2)
            continue
        batch.gas = gas
        start += len(batch.deposits)
        report.batches.append(batch)
        fees = sender.fees()
        report.max_fee_per_gas = fees.max_fee_per_gas
        gas_limit = int(gas * GAS_MARGIN)
        cost = gas_limit * fees.max_fee_per_gas
        balance = sender.balance()
        if balance < cost:
            raise ChainError(
                f"The key's account {sender.address} holds {balance} wei, less than the {cost} wei"
                f" ({gas_limit} gas at up to {fees.max_fee_per_gas} wei) the next transaction may"
                f" cost: send it some of {network.name}'s gas coin. Nothing more was sent.")
        if dry_run:
            continue
        signed = sender.sign(to=factory, data=_calldata(batch), gas_limit=gas_limit, fees=fees,
                             nonce=sender.nonce())
        planned = [Item(0, d.address, token, d.process_id, d.merchant_id, d.payout_address, amount)
                   for d in batch.deposits for token, amount in batch.balances[d.address].items()
                   if amount]
        collection = Collection(
            id=0, network_id=network.id, chain_id=network.chain_id, factory=factory,
            sender=sender.address, nonce=signed.nonce, tx_hash=signed.tx_hash, raw_tx=signed.raw,
            gas_limit=gas_limit, max_fee_per_gas=fees.max_fee_per_gas, status="sent",
            block_number=None, gas_used=None, gas_price=None, error=None, created_at=int(now),
            settled_at=None)
        with db.transaction() as conn:  # recorded before it is broadcast
            collection_id = payout_rows.insert_collection(conn, collection, planned)
        batch.collection = Collection(**{**collection.__dict__, "id": collection_id})
        try:
            sender.broadcast(signed.raw)
        except rpc.RpcError as e:
            if e.code is None:
                raise  # unreachable: it may have gone out; the next run settles it
            batch.collection = _record_outcome(db, sender, batch.collection, None, now, None,
                                               error=f"refused by the node: {e}")
            raise ChainError(f"The node refused the collection {signed.tx_hash}: {e}") from None
        receipt = sender.wait(signed.tx_hash, timeout)
        if receipt is None:
            raise ChainError(f"The collection {signed.tx_hash} was sent but not mined within"
                             f" {timeout} s: the next run settles it from its receipt.")
        batch.collection, batch.moved = _record_outcome(db, sender, batch.collection, receipt, now,
                                                        None, with_items=True)
        if batch.collection.status != "succeeded":
            raise ChainError(f"The collection {signed.tx_hash} reverted (block"
                             f" {receipt.block_number}): nothing in it moved.")


# --- outcomes --------------------------------------------------------------------------------

def _moved(sender, collection, items, receipt) -> list:
    """The items as the receipt shows them moved: each token's amount from its Transfer logs from
    the deposit address to its payout; the gas coin's from the address's balance just before the
    block (the forwarder's self-destruct sends all of it and leaves no log). Items that moved
    nothing are left out."""
    by_address = {i.address.lower(): i for i in items}
    tokens = defaultdict(int)
    for log in receipt.logs:
        topics = log.get("topics") or []
        if len(topics) != 3 or str(topics[0]).lower() != TRANSFER_TOPIC:
            continue
        source, target = "0x" + topics[1][-40:], "0x" + topics[2][-40:]
        item = by_address.get(source.lower())
        if item is None or item.payout_address.lower() != target.lower():
            continue
        token = next((i.token for i in items if i.token.lower() == log["address"].lower()),
                     log["address"])
        tokens[(item.address, token)] += rpc.word(log.get("data"), "a Transfer log's data")
    moved = []
    seen = set()
    for i in items:
        if (i.address, i.token) in seen:
            continue
        seen.add((i.address, i.token))
        if i.token == GAS_COIN:
            try:
                amount = sender.balance(i.address, hex(receipt.block_number - 1))
            except rpc.RpcError:
                amount = i.amount  # a node without the state of that block: the amount read
        else:
            amount = tokens.pop((i.address, i.token), 0)
        if amount:
            moved.append(Item(collection.id, i.address, i.token, i.process_id, i.merchant_id,
                              i.payout_address, amount))
    for (address, token), amount in tokens.items():  # a listed token that arrived after the read
        i = by_address[address.lower()]
        moved.append(Item(collection.id, address, token, i.process_id, i.merchant_id,
                          i.payout_address, amount))
    return moved


def _record_outcome(db, sender, collection, receipt, now, settled, *, error=None, with_items=False):
    """Settle a `sent` collection by its receipt (None: failed with `error`)."""
    items = payout_rows.items_of(db.connection(), [collection.id]).get(collection.id, [])
    moved = []
    if receipt is not None and receipt.status == 1:
        status = "succeeded"
        moved = _moved(sender, collection, items, receipt)
    else:
        status = "failed"
        error = error or "reverted"
    with db.transaction() as conn:
        payout_rows.settle(
            conn, collection.id, status=status,
            block_number=receipt.block_number if receipt else None,
            gas_used=receipt.gas_used if receipt else None,
            gas_price=receipt.gas_price if receipt else None, error=error, now=int(now),
            items=moved if status == "succeeded" else None)
    done = Collection(**{**collection.__dict__, "status": status, "error": error,
                         "block_number": receipt.block_number if receipt else None,
                         "gas_used": receipt.gas_used if receipt else None,
                         "gas_price": receipt.gas_price if receipt else None})
    if settled is not None:
        settled.append((done, moved))
    return (done, moved) if with_items else done
