"""Plain records passed between the data layer and the rest: no SQL types leak past app/data/."""
from dataclasses import dataclass
from typing import NamedTuple

from app.core.money import minimum_paid
from app.core.testnets import is_test_network

FINAL_STATUSES = ("completed", "cancelled", "expired")
STATUSES = ("pending",) + FINAL_STATUSES


@dataclass(frozen=True)
class Merchant:
    id: str
    name: str
    livemode: bool
    public_key: str
    webhook_secret: str  # given at creation; its first webhook endpoint starts with it
    disabled_at: int | None
    created_at: int
    currency: str = "USD"  # its new processes' when the preorder names none
    display_name: str | None = None  # what the checkout page shows (None: `name`)

    @property
    def disabled(self):
        return self.disabled_at is not None

    def __repr__(self):  # never print the webhook secret by accident
        return f"Merchant(id={self.id!r}, name={self.name!r}, livemode={self.livemode})"


@dataclass(frozen=True)
class Endpoint:
    """A webhook endpoint of a merchant: where its events go, which ones, signed with what."""
    seq: int | None
    id: str
    merchant_id: str
    url: str
    events: tuple[str, ...]  # ("*",): every type
    enabled: bool
    description: str | None
    secret: str
    previous_secret: str | None  # the rolled one, still signing beside `secret` until _until
    previous_secret_until: int | None
    created_at: int
    deleted_at: int | None = None

    def signing_secrets(self, now) -> list[str]:
        """The secrets a delivery at `now` is signed with: the current one, then the rolled one
        while its overlap lasts."""
        if self.previous_secret and now < (self.previous_secret_until or 0):
            return [self.secret, self.previous_secret]
        return [self.secret]

    def wants(self, event_type) -> bool:
        return self.events == ("*",) or event_type in self.events

    def __repr__(self):  # never print the secret by accident
        return f"Endpoint(id={self.id!r}, merchant_id={self.merchant_id!r}, enabled={self.enabled})"


@dataclass(frozen=True)
class SecretKey:
    id: int
    merchant_id: str
    key_prefix: str
    created_at: int
    revoked_at: int | None
    expires_at: int | None = None  # a rolled key works until then

    def state(self, now) -> str:
        """active, expiring (rolled, in its overlap), expired or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is None:
            return "active"
        return "expiring" if now < self.expires_at else "expired"


@dataclass(frozen=True)
class Process:
    seq: int | None
    id: str
    merchant_id: str
    status: str
    amount: str  # the exact decimal literal
    metadata: str  # compact JSON text, as stored
    livemode: bool
    created_at: int
    updated_at: int
    expires_at: int
    # Paid in time, still confirming: its live payment has a `seen` transfer in a block at or before
    # expires_at. Such a process stays pending past its expiry (see docs/payments.md).
    held: bool = False
    currency: str = "USD"  # ISO 4217: the amount is in it
    # The hosted checkout page: what it shows and where it sends the customer (None: not given),
    # and the base URL of its checkoutUrl (None: made before checkout pages).
    description: str | None = None
    success_url: str | None = None
    cancel_url: str | None = None
    checkout_base: str | None = None
    link_id: str | None = None  # the payment link it was made from

    def effective_status(self, now):
        """A pending process past its expiry is expired, whether or not the sweep has run, unless it
        is held (app/data/processes.py HELD: paid in time and confirming, or the watcher behind)."""
        if self.status == "pending" and now >= self.expires_at and not self.held:
            return "expired"
        return self.status

    def effective_updated_at(self, now):
        """When it last changed as shown: an expired process that the sweep has not marked yet
        changed at its expiry."""
        if self.status == "pending" and self.effective_status(now) == "expired":
            return self.expires_at
        return self.updated_at

    def __repr__(self):  # metadata may hold personal data: keep it out of logs and tracebacks
        return f"Process(id={self.id!r}, status={self.status!r}, amount={self.amount!r})"


@dataclass(frozen=True)
class Delivery:
    """One event's delivery to one endpoint: its own attempts, schedule, lease and state."""
    seq: int
    event_id: str
    endpoint_id: str
    merchant_id: str
    status: str  # DELIVERY_STATUSES
    attempts: int  # since the last replay
    next_attempt_at: int | None
    lease_owner: str | None
    lease_expires_at: int | None
    last_error: str | None
    delivered_at: int | None

    @property
    def retrying(self):
        return self.status == "pending" and self.last_error is not None


DELIVERY_STATUSES = ("pending", "delivered", "failed", "cancelled")
FINAL_DELIVERY_STATUSES = DELIVERY_STATUSES[1:]
# An event's state in lists: the first of these that one of its deliveries is in; no delivery at
# all (no endpoint wanted it) is "no_endpoint".
_SUMMARY_ORDER = ("pending", "failed", "cancelled", "delivered")


@dataclass(frozen=True)
class Event:
    """A webhook event: its id (the webhook-id on every endpoint) and the exact body sent; where it
    went is in `deliveries` (read with it, oldest endpoint first)."""
    seq: int | None
    id: str
    merchant_id: str
    process_id: str | None  # None: a test event (webhook.test)
    type: str
    payload: str
    created_at: int
    deliveries: tuple[Delivery, ...] = ()

    @property
    def status(self) -> str:
        """pending, failed, cancelled, delivered (_SUMMARY_ORDER), or no_endpoint."""
        states = {d.status for d in self.deliveries}
        return next((s for s in _SUMMARY_ORDER if s in states), "no_endpoint")

    @property
    def last_error(self) -> str | None:
        """The latest error of a delivery still pending or failed: what is going wrong now."""
        errors = [d.last_error for d in self.deliveries if d.status in ("pending", "failed")]
        return next((e for e in reversed(errors) if e), None)

    @property
    def attempts(self) -> int:
        return sum(d.attempts for d in self.deliveries)

    @property
    def next_attempt_at(self) -> int | None:
        return min((d.next_attempt_at for d in self.deliveries if d.status == "pending"
                    and d.next_attempt_at is not None), default=None)

    @property
    def delivered_at(self) -> int | None:
        return max((d.delivered_at for d in self.deliveries if d.delivered_at), default=None)

    def __repr__(self):
        return f"Event(id={self.id!r}, type={self.type!r}, status={self.status!r})"


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt of an event, as recorded."""
    id: int
    event_id: str
    attempted_at: int
    url: str | None
    status_code: int | None
    error: str | None
    duration_ms: int
    endpoint_id: str | None = None  # None: made before endpoints (then to the merchant's URL)


# --- The chain watcher ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Transfer:
    """One ERC-20 Transfer log to a deposit address; amount in base units."""
    chain_id: int
    tx_hash: str
    log_index: int
    network_id: str
    process_id: str
    token_contract: str
    from_address: str
    amount: int
    block_number: int
    block_hash: str
    block_timestamp: int
    status: str  # seen | confirmed | orphaned | reversed
    seen_at: int
    confirmed_at: int | None
    head_block: int | None = None  # its network's head, when read for display (confirmations)
    accepted: bool = False  # an unexpected transfer staff accepted as payment (its credited amount)


@dataclass(frozen=True)
class UnexpectedTransfer:
    """An ERC-20 Transfer to a deposit address that is not its process's choice (another token, or
    another network), confirmed: what `payment.unexpectedTransfers` lists. `symbol` and `decimals`
    as the contract answered (None: no answer); `credited_amount`, once accepted as payment, in the
    base units of the payment's token."""
    chain_id: int
    tx_hash: str
    log_index: int
    network_id: str
    process_id: str
    token_contract: str
    from_address: str
    amount: int  # base units of token_contract
    block_number: int
    block_hash: str
    block_timestamp: int
    status: str
    seen_at: int
    confirmed_at: int | None
    symbol: str | None = None
    decimals: int | None = None
    reported_at: int | None = None
    accepted_at: int | None = None
    accepted_by: str | None = None
    credited_amount: int | None = None

    @property
    def key(self) -> str:
        """How a path names it: `<txHash>:<logIndex>`."""
        return f"{self.tx_hash}:{self.log_index}"


@dataclass(frozen=True)
class ChainBlock:
    network_id: str
    number: int
    hash: str
    parent_hash: str
    timestamp: int


class WatchedAddress(NamedTuple):
    """A deposit address the watcher looks for, with the network and token it must be paid in
    (lowercase), and its process's expiry (a transfer in a block no later than one at or before it
    is in time). A named tuple, quick to build: a watcher builds one per watched address at its
    start."""
    process_id: str
    address: str
    token_contract: str
    expires_at: int
    network_id: str = ""


@dataclass(frozen=True)
class OutboxBacklog:
    """Pending webhook events by state, and how long the oldest due one has waited (seconds)."""
    due: int
    in_flight: int
    retrying: int
    oldest_due_age: int

    @property
    def pending(self):
        return self.due + self.in_flight + self.retrying


@dataclass(frozen=True)
class Snapshot:
    """The figures of /metrics: counts by status, read from the database in one transaction."""
    backlog: OutboxBacklog
    pending: int  # deliveries pending
    deliveries: dict  # final status -> deliveries that reached it (delivery_totals)
    processes: dict  # effective process status -> processes


@dataclass(frozen=True)
class Pruned:
    """What one retention run deleted."""
    events: int = 0
    attempts: int = 0
    idempotency_keys: int = 0
    more: bool = False  # stopped at its batch limit with more left


@dataclass(frozen=True)
class Network:
    """An EVM network the operator enabled, with the chain watcher's position on it."""
    id: str
    name: str
    chain_id: int
    rpc_url: str  # may hold a provider's API key: never logged or printed whole
    confirmations: int
    start_block: int
    scanned_block: int
    head_block: int
    disabled_at: int | None
    created_at: int
    # the operator's --testnet; `is_test` also knows the well-known test chains
    testnet: bool = False
    finality: str = "confirmations"  # or "safe", "finalized": the node's block of that tag
    max_block_age: int | None = None  # seconds; an older head block makes it unavailable
    # Its health, as the watcher's polls leave it (app/domain/health.py): unix seconds
    polled_at: int | None = None  # the last successful poll
    failing_since: int | None = None  # the first failed poll since then
    ok_since: int | None = None  # when it was last found available again
    head_timestamp: int | None = None  # the head block's, at the last successful poll
    tag_block: int | None = None  # the finality tag's block number then
    max_fee_per_gas: int | None = None  # wei: the operator's ceiling for what is sent on it

    @property
    def is_test(self) -> bool:
        return is_test_network(self.chain_id, self.testnet)

    def __repr__(self):
        return f"Network(id={self.id!r}, chain_id={self.chain_id})"


@dataclass(frozen=True)
class Asset:
    """A token customers may pay with, on one network."""
    id: str
    network_id: str
    symbol: str
    name: str
    contract: str  # EIP-55
    decimals: int
    disabled_at: int | None
    created_at: int
    # Added with --eip3009 (payable without gas): its EIP-712 domain's name and version.
    eip3009_name: str | None = None
    eip3009_version: str | None = None
    peg: str = "USD"  # the currency one token is worth

    @property
    def eip3009(self) -> bool:
        return self.eip3009_name is not None


@dataclass(frozen=True)
class Wallet:
    """A merchant's account xpub and the next address index to give out."""
    merchant_id: str
    xpub: str
    next_index: int
    updated_at: int

    def __repr__(self):  # the xpub lists every payment the merchant received: keep it out of logs
        return f"Wallet(merchant_id={self.merchant_id!r}, next_index={self.next_index})"


@dataclass(frozen=True)
class Payment:
    """The customer's choice for a live process and its deposit address. `head_block` is read with
    it from its network (the head when last asked), to count the confirmations of its transfers.
    Mode `xpub`: the address is the merchant wallet's child `address_index`. Mode `payout`: it is
    `factory`'s CREATE2 address for (`payout_address`, the process), `address_index` None."""
    process_id: str
    merchant_id: str
    address_index: int | None
    address: str
    asset_id: str
    network_id: str
    chain_id: int
    token_contract: str
    decimals: int
    amount_due: int  # base units
    created_at: int
    updated_at: int
    head_block: int = 0
    mode: str = "xpub"
    payout_address: str | None = None
    factory: str | None = None
    tolerance: str = "0"  # underpayment tolerance in percent, the merchant's at the first confirm
    finality: str = "confirmations"  # its network's (read with it)
    quote: str | None = None  # the locked quote, compact JSON (None: made before quotes, at par)

    def covered_by(self, paid: int) -> bool:
        """Whether `paid` (base units) completes the payment: the amount due less the tolerance
        (app/core/money.py minimum_paid). The chain watcher's completion rule."""
        return paid >= minimum_paid(self.amount_due, self.tolerance)


@dataclass(frozen=True)
class PaymentView:
    """A payment with its seen and confirmed transfers (ordered by block, then log index; those
    accepted as payment among them), and its confirmed unexpected transfers: what the `payment`
    object of a Process shows."""
    payment: Payment
    transfers: tuple[Transfer, ...]
    unexpected: tuple[UnexpectedTransfer, ...] = ()

    @property
    def paid(self) -> int:
        """Confirmed money, in the base units of the payment's token (views_of rescales transfers
        of an earlier choice)."""
        return sum(t.amount for t in self.transfers if t.status == "confirmed")


@dataclass(frozen=True)
class Rate:
    """A pair's one source, "EUR/USD" being the price of one EUR in USD: a price feed on a network
    (its last answer as the watcher read it) or a manual rate (`value` as set, `updated_at` when).
    Whether it counts now is app/domain/rates.py's `state`."""
    pair: str
    source: str  # feed | manual
    network_id: str | None
    feed: str | None
    feed_decimals: int | None
    sequencer_feed: str | None
    max_age: int
    max_depeg: str
    value: str | None
    round_id: str | None
    answered_in_round: str | None
    updated_at: int | None
    sequencer_answer: int | None
    sequencer_since: int | None
    problem: str | None
    read_at: int | None
    reported: str | None
    created_at: int

    @property
    def base(self) -> str:
        return self.pair.split("/")[0]

    @property
    def quote(self) -> str:
        return self.pair.split("/")[1]


@dataclass(frozen=True)
class Link:
    """A payment link: one thing sold again and again, each click making a process of its own."""
    id: str
    merchant_id: str
    livemode: bool
    amount: str  # the exact decimal literal
    currency: str
    description: str
    metadata: str  # compact JSON
    success_url: str | None
    max_payments: int | None
    expires_at: int | None
    deactivated_at: int | None
    created_at: int

    def __repr__(self):  # metadata may hold personal data
        return f"Link(id={self.id!r}, merchant_id={self.merchant_id!r})"

    def why_unavailable(self, paid, now) -> str | None:
        """Why the link makes no more processes (None: it does): deactivated, expired, or its
        `maxPayments` processes (`paid`: those completed) done."""
        if self.deactivated_at is not None:
            return "deactivated"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        if self.max_payments is not None and paid >= self.max_payments:
            return "sold out"
        return None


@dataclass(frozen=True)
class Refund:
    """A refund the merchant pays from its own wallet to the customer's address, in the payment's
    token on its network; amounts in that token's base units. The settling transfer's fields are
    set once it is `completed` (app/chain/refunds.py)."""
    id: str
    process_id: str
    merchant_id: str
    status: str
    asset_id: str
    network_id: str
    chain_id: int
    token_contract: str  # EIP-55
    decimals: int
    amount: int
    address: str  # EIP-55
    reason: str | None
    created_at: int
    updated_at: int
    scanned_block: int  # blocks up to this one were searched for its transfer
    tx_hash: str | None = None
    log_index: int | None = None
    block_number: int | None = None
    block_timestamp: int | None = None
    transfer_amount: int | None = None
    named_tx_hash: str | None = None  # the transaction the merchant says paid it
    # the settling transfer's block, and the kept block that proved it
    block_hash: str | None = None
    anchor_block: int | None = None
    anchor_hash: str | None = None

    @property
    def shown_tx_hash(self) -> str | None:
        """The Refund object's txHash: the settling transfer's once completed, else the named
        one."""
        return self.tx_hash if self.status == "completed" else self.named_tx_hash

    def __repr__(self):  # the reason may name the customer
        return f"Refund(id={self.id!r}, process_id={self.process_id!r}, status={self.status!r})"
