"""Payment links: one thing sold again and again without code (docs/api.md, "Payment links").

A link holds a price (amount and currency), a description, metadata and a success URL. Opening
it (`GET /l/<linkId>`) makes nothing; the customer's click (`POST /l/<linkId>`) makes a process from
it (`open_process`), whose metadata is the link's plus `paymentLinkId`, in one transaction that
checks the link is still available (active, not expired, fewer completed processes than
`maxPayments`) and that the client address made fewer than LINK_PROCESSES_PER_MINUTE processes from
it in the last 60 s: opening or scripting a link cannot fill the database.
"""
import secrets

from app.core.jsonutil import dumps_compact, loads
from app.core.records import Link
from app.data import links as link_rows
from app.data import merchants as merchant_rows
from app.data import processes as process_rows
from app.domain import processes

WINDOW_SECONDS = 60


class LinkNotFound(LookupError):
    pass


class LinkUnavailable(Exception):
    """Deactivated, expired or sold out: it makes no process (410)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class TooManyProcesses(Exception):
    """The client made LINK_PROCESSES_PER_MINUTE processes from the link within 60 s (429)."""

    def __init__(self, retry_after):
        super().__init__("Too many payments started from this link: try again in a minute.")
        self.retry_after = retry_after


class LinkError(ValueError):
    """A link cannot be made as asked; `errors` maps fields to messages."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.errors = {field: [message]}


def new_link_id() -> str:
    return "link_" + secrets.token_hex(12)


def create(db, merchant, *, amount, description, now, currency=None, metadata="{}",
           success_url=None, max_payments=None, expires_at=None) -> Link:
    """A new active link of the merchant; its currency is the merchant's unless given."""
    now = int(now)
    code = currency or merchant.currency
    processes.check_fields(merchant, amount, code, success_url=success_url)
    if max_payments is not None and max_payments < 1:
        raise LinkError("maxPayments", "Must be a whole number, at least 1.")
    if expires_at is not None and expires_at <= now:
        raise LinkError("expiresAt", "Must be in the future.")
    link = Link(id=new_link_id(), merchant_id=merchant.id, livemode=merchant.livemode,
                amount=amount, currency=code, description=description, metadata=metadata,
                success_url=success_url, max_payments=max_payments, expires_at=expires_at,
                deactivated_at=None, created_at=now)
    with db.transaction() as conn:
        link_rows.insert(conn, link)
    return link


def get(db, merchant_id, link_id) -> Link:
    """The merchant's link (None: any merchant's, as an operator or the public page sees it)."""
    link = link_rows.get(db.connection(), link_id)
    if link is None or (merchant_id is not None and link.merchant_id != merchant_id):
        raise LinkNotFound(link_id)
    return link


def page(db, merchant_id, *, limit, starting_after=None) -> tuple[list[Link], bool]:
    before = get(db, merchant_id, starting_after) if starting_after is not None else None
    return link_rows.page(db.connection(), merchant_id, limit, before)


def payments(db, links) -> dict[str, int]:
    """{link id: its completed processes}."""
    return link_rows.payments(db.connection(), [link.id for link in links])


def deactivate(db, merchant_id, link_id, now) -> Link:
    """Stop the link making processes (those already made may still complete); twice is fine."""
    with db.transaction() as conn:
        link = link_rows.get(conn, link_id)
        if link is None or (merchant_id is not None and link.merchant_id != merchant_id):
            raise LinkNotFound(link_id)
        link_rows.deactivate(conn, link_id, int(now))
    return link_rows.get(db.connection(), link_id)


def open_process(db, link_id, *, client, now, ttl, per_minute, checkout_base):
    """The customer's click: a new pending process of the link's merchant, with the link's price,
    description and success URL, its metadata the link's plus "paymentLinkId". LinkNotFound,
    LinkUnavailable (410), TooManyProcesses (429); one transaction, so clicks at once on any worker
    are counted one after the other."""
    now = int(now)
    with db.transaction() as conn:
        link = link_rows.get(conn, link_id)
        if link is None:
            raise LinkNotFound(link_id)
        link_rows.lock(conn, link_id)
        why = link.why_unavailable(link_rows.payments(conn, [link_id]).get(link_id, 0), now)
        if why:
            raise LinkUnavailable(why)
        recent = link_rows.hits_since(conn, link_id, client, now - WINDOW_SECONDS + 1)
        if len(recent) >= per_minute:
            raise TooManyProcesses(retry_after=max(1, recent[0] + WINDOW_SECONDS - now))
        merchant = merchant_rows.get(conn, link.merchant_id)
        if merchant is None or merchant.disabled:
            raise LinkUnavailable("the merchant no longer sells")
        metadata = loads(link.metadata.encode("utf-8"))
        metadata["paymentLinkId"] = link.id
        process = processes.new_process(
            merchant, link.amount, dumps_compact(metadata), now, ttl, currency=link.currency,
            description=link.description, success_url=link.success_url,
            cancel_url=None, checkout_base=checkout_base, link_id=link.id)
        process_rows.insert(conn, process)
        link_rows.hit(conn, link_id, client, now, forget_before=now - WINDOW_SECONDS)
    return process


def display_name(merchant) -> str:
    """What the checkout and link pages call the merchant."""
    return merchant.display_name or merchant.name


def set_display_name(db, merchant_id, name) -> str | None:
    """The name the checkout pages show (blank: the merchant's name again); at most 80 characters
    of plain text."""
    name = (name or "").strip() or None
    if name is not None and (len(name) > 80
                             or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name)):
        raise LinkError("displayName", "Must be at most 80 characters of plain text.")
    with db.transaction() as conn:
        if not merchant_rows.set_display_name(conn, merchant_id, name):
            raise LinkNotFound(merchant_id)
    return name
