"""The overview (`/dashboard/overview`, where a login lands): what staff read at a glance, from the
database only (app/data/overview.py: one merchant, the last 30 UTC days, indexed reads), never from
a chain's node: a node that does not answer never holds the page (what the addresses hold on the
chain is read on the payouts page). Every figure is a link to the list it counts; the page and its
chart are app/console/overview.py."""
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from app.core.records import STATUSES
from app.data import overview as overview_rows
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.domain import payments

DAY = overview_rows.DAY
WINDOWS = ((1, "Today"), (7, "7 days"), (30, "30 days"))  # UTC days, today included


@dataclass
class AssetFigures:
    """One asset's money over the windows, in token units."""
    id: str
    symbol: str
    paid: dict = field(default_factory=lambda: {days: Decimal(0) for days, _ in WINDOWS})
    payments: dict = field(default_factory=lambda: {days: 0 for days, _ in WINDOWS})
    refunded: dict = field(default_factory=lambda: {days: Decimal(0) for days, _ in WINDOWS})
    daily: dict = field(default_factory=dict)  # day number -> paid that day


@dataclass
class CurrencyFigures:
    """Processes of one currency over the windows: how many, the exact sum of their amounts (in
    that currency), and that sum per day."""
    code: str
    amount: dict = field(default_factory=lambda: {days: Decimal(0) for days, _ in WINDOWS})
    count: dict = field(default_factory=lambda: {days: 0 for days, _ in WINDOWS})
    daily: dict = field(default_factory=dict)  # day number -> amount that day


@dataclass
class Overview:
    """The overview's figures: the 30 days end `today` (a UTC day number)."""
    today: int
    assets: list  # AssetFigures, most paid first
    sandbox: list  # CurrencyFigures of the sandbox payments (`money`), test mode only
    completed: list  # CurrencyFigures of the completed processes (`completed`)
    statuses: list  # (status, processes created in the 30 days)
    partly: int  # processes partly paid
    partly_more: bool  # there may be more (partly_count)
    overpaid: int  # processes paid more than was due (overpaid_count)
    overpaid_more: bool  # there may be more
    waiting: list  # what waits to be collected (`waiting`)
    failing: int  # events whose delivery is failing


def of_merchant(db, merchant, now, recount=False) -> Overview:
    """The merchant's figures over the last 30 UTC days, today included: read from what is kept
    current as it happens (app/data/rollups.py), or with `recount` summed from the history (what
    those must equal, to the unit)."""
    conn, current = db.connection(), int(now)
    today = current // DAY
    since = (today - 29) * DAY
    from_seq = overview_rows.seq_since(conn, since)
    read = _history(conn, merchant.id, since, from_seq) if recount else \
        (lambda kind: overview_rows.days(conn, merchant.id, kind, since))
    assets, sandbox = money(conn, current, read, not merchant.livemode, merchant.currency)
    partly, partly_more = partly_count(db, merchant.id, since)
    overpaid, overpaid_more = overpaid_count(db, merchant.id, since)
    return Overview(today=today, assets=assets, sandbox=sandbox, overpaid=overpaid,
                    overpaid_more=overpaid_more,
                    completed=_by_currency(read("completed"), today, merchant.currency),
                    statuses=statuses(conn, merchant.id, current, from_seq, read("final")),
                    partly=partly, partly_more=partly_more,
                    waiting=waiting(conn, merchant.id, since),
                    failing=overview_rows.failing_deliveries(conn, merchant.id))


# Partly paid processes are counted from their payments on each view, the newest PARTLY_MAX of
# them at most: a view costs the same however many there are ("at least" past that).
PARTLY_MAX = 1000


def partly_count(db, merchant_id, since) -> tuple[int, bool]:
    """(processes that reported a partial payment since `since`, did not complete, and whose
    confirmed money is still above zero and below what is due (exactly); whether there may be
    more: only the newest PARTLY_MAX reports are looked at)."""
    conn = db.connection()
    candidates = overview_rows.partly_paid_candidates(conn, merchant_id, since, PARTLY_MAX + 1)
    more = len(candidates) > PARTLY_MAX
    count, unsure = overview_rows.partly_paid(conn, candidates[:PARTLY_MAX])
    count += len(payments.partly_paid(payments.views_of(db, unsure))) if unsure else 0
    return count, more


def overpaid_count(db, merchant_id, since) -> tuple[int, bool]:
    """(processes with money confirmed since `since` whose confirmed money is above what is due,
    exactly; whether there may be more: only the processes of the newest PARTLY_MAX confirmed
    transfers are looked at, so a view costs the same however many there are)."""
    conn = db.connection()
    candidates = overview_rows.paid_candidates(conn, merchant_id, since, PARTLY_MAX + 1)
    more = len(candidates) > PARTLY_MAX
    count, unsure = overview_rows.partly_paid(conn, candidates[:PARTLY_MAX], over=True)
    if unsure:
        count += sum(1 for v in payments.views_of(db, unsure).values()
                     if v.paid > v.payment.amount_due)
    return count, more


def waiting(conn, merchant_id, since) -> list[dict]:
    """What waits in the merchant's deposit addresses per network and token, as the database knows
    it (overview_rows.uncollected), from the day before each network's last collection on (or the
    30 days' start): a list of dicts for the page."""
    networks = {n.id: n for n in payment_rows.list_networks(conn)}
    symbols = {(a.network_id, a.contract.lower()): a for a in payment_rows.list_assets(conn)}
    last = overview_rows.last_collection(conn, merchant_id)
    found = []
    for network_id in payout_rows.networks_with_factory(conn):
        start = max(since, last.get(network_id, 0) - DAY)
        for token, addresses, base in overview_rows.uncollected(conn, merchant_id, network_id,
                                                                start):
            asset = symbols.get((network_id, token.lower()))
            found.append({"network": networks[network_id].name, "network_id": network_id,
                          "amount": text(_units(base, asset.decimals)) if asset else str(base),
                          "symbol": asset.symbol if asset else token, "addresses": addresses,
                          "since": day_text(start // DAY)})
    return found


def _units(base, decimals) -> Decimal:
    return Decimal(base).scaleb(-decimals)


def text(amount: Decimal) -> str:
    """An amount as people read it: no exponent, no trailing zeros."""
    return format(amount.normalize(), "f") if amount else "0"


def day_text(day) -> str:
    return datetime.fromtimestamp(day * DAY, UTC).strftime("%Y-%m-%d")


def _windows(day, today):
    """The windows (in days) that a day falls in."""
    return [days for days, _ in WINDOWS if day > today - days]


def _by_currency(rows, today, first) -> list[CurrencyFigures]:
    """CurrencyFigures from [(currency, day, processes, amount)]: the currency `first` (the
    merchant's) first, then by code (sums in different currencies do not compare)."""
    found = {}
    for code, day, count, amount in rows:
        figures = found.setdefault(code, CurrencyFigures(code))
        figures.daily[day] = figures.daily.get(day, Decimal(0)) + amount
        for days in _windows(day, today):
            figures.amount[days] += amount
            figures.count[days] += count
    return sorted(found.values(), key=lambda f: (f.code != first, f.code))


def _history(conn, merchant_id, since, from_seq):
    """The figures' rows summed from the history, by kind (the recount)."""
    queries = {
        "paid": lambda: overview_rows.paid_by_day(conn, merchant_id, since),
        "refunded": lambda: overview_rows.refunded_by_day(conn, merchant_id, since),
        "completed": lambda: overview_rows.completed_by_day(conn, merchant_id, since, 0),
        "sandbox": lambda: overview_rows.completed_without_transfer_by_day(conn, merchant_id, since,
                                                                           0),
        "final": lambda: overview_rows.final_by_created_day(conn, merchant_id, from_seq),
    }
    return lambda kind: queries[kind]()


def money(conn, now, read, sandbox_mode, currency=None) -> tuple[list[AssetFigures], list]:
    """(per asset id: paid and refunded over the windows, and paid per day; in test mode
    (`sandbox_mode`) the sandbox payments, processes completed without a live payment, per
    currency: CurrencyFigures over the windows and per day). `read(kind)`: the rows of a kind."""
    today = now // DAY
    assets = {(a.network_id, a.contract.lower()): a for a in payment_rows.list_assets(conn)}
    by_id = {}

    def figures(asset_id, symbol):
        return by_id.setdefault(asset_id, AssetFigures(asset_id, symbol))

    for network_id, token, day, count, base in read("paid"):
        asset = assets.get((network_id, token.lower()))
        if asset is None:  # a token no longer registered: shown by its contract
            found, amount = figures(token, token[:10] + "…"), Decimal(base)
        else:
            found, amount = figures(asset.id, asset.symbol), _units(base, asset.decimals)
        found.daily[day] = found.daily.get(day, Decimal(0)) + amount
        for days in _windows(day, today):
            found.paid[days] += amount
            found.payments[days] += count
    symbols = {a.id: a.symbol for a in assets.values()}
    for asset_id, decimals, day, _, base in read("refunded"):
        found = figures(asset_id, symbols.get(asset_id, asset_id))
        for days in _windows(day, today):
            found.refunded[days] += _units(base, decimals)
    sandbox = read("sandbox") if sandbox_mode else ()
    return (sorted(by_id.values(), key=lambda f: (-f.paid[30], f.id)),
            _by_currency(sandbox, today, currency))


def statuses(conn, merchant_id, now, from_seq, final_rows) -> list[tuple[str, int]]:
    """The merchant's processes created in the 30 days by effective status: the final ones from
    `final_rows` [(status, day created, processes)], the pending ones counted now (a pending one
    past its expiry, not held, is expired)."""
    counts = {status: 0 for status in STATUSES}
    for status, _, count in final_rows:
        counts[status] += count
    pending, lapsed = overview_rows.pending_counts(conn, merchant_id, now, from_seq)
    counts["pending"] += pending - lapsed
    counts["expired"] += lapsed
    return [(status, counts[status]) for status in STATUSES]
