"""Plain records passed between the data layer and the rest: no SQL types leak past app/data/."""
from dataclasses import dataclass

FINAL_STATUSES = ("completed", "cancelled", "expired")
STATUSES = ("pending",) + FINAL_STATUSES


@dataclass(frozen=True)
class Merchant:
    id: str
    name: str
    livemode: bool
    public_key: str
    webhook_secret: str
    webhook_url: str | None
    disabled_at: int | None
    created_at: int

    @property
    def disabled(self):
        return self.disabled_at is not None

    def __repr__(self):  # never print the webhook secret by accident
        return f"Merchant(id={self.id!r}, name={self.name!r}, livemode={self.livemode})"


@dataclass(frozen=True)
class SecretKey:
    id: int
    merchant_id: str
    key_prefix: str
    created_at: int
    revoked_at: int | None


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

    def effective_status(self, now):
        """A pending process past its expiry is expired, whether or not the sweep has run."""
        if self.status == "pending" and now >= self.expires_at:
            return "expired"
        return self.status

    def __repr__(self):  # metadata may hold personal data: keep it out of logs and tracebacks
        return f"Process(id={self.id!r}, status={self.status!r}, amount={self.amount!r})"


@dataclass(frozen=True)
class Event:
    seq: int | None
    id: str
    merchant_id: str
    process_id: str
    type: str
    payload: str
    created_at: int
    status: str
    attempts: int
    next_attempt_at: int | None
    lease_owner: str | None
    lease_expires_at: int | None
    last_error: str | None
    delivered_at: int | None

    def __repr__(self):
        return f"Event(id={self.id!r}, type={self.type!r}, status={self.status!r})"


EVENT_STATUSES = ("pending", "delivered", "failed", "no_endpoint")
FINAL_EVENT_STATUSES = EVENT_STATUSES[1:]


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
    events: dict  # event status -> events stored
    deliveries: dict  # final status -> events that reached it, pruned ones included
    processes: dict  # effective process status -> processes


@dataclass(frozen=True)
class Pruned:
    """What one retention run deleted."""
    events: int = 0
    attempts: int = 0
    idempotency_keys: int = 0
    more: bool = False  # stopped at its batch limit with more left
