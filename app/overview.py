"""The overview (`/dashboard/overview`, where a login lands): what staff read at a glance, from the
database only (app/data/overview.py: one merchant, the last 30 UTC days, indexed reads), never from a
chain's node: a node that does not answer never holds the page (what the addresses hold on the
chain is read on the payouts page). Every figure is a link to the list it counts.

The chart is drawn here as SVG (`chart`): a few lines of our own rather than a charting library,
since one bar chart of 30 days needs no more, and no script runs to see it."""
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal

from app.data import overview as overview_rows
from app.data import payments as payment_rows
from app.records import STATUSES

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


def _units(base, decimals) -> Decimal:
    return Decimal(base).scaleb(-decimals)


def text(amount: Decimal) -> str:
    """An amount as people read it: no exponent, no trailing zeros."""
    return format(amount.normalize(), "f") if amount else "0"


def day_text(day) -> str:
    return datetime.fromtimestamp(day * DAY, timezone.utc).strftime("%Y-%m-%d")


def _windows(day, today):
    """The windows (in days) that a day falls in."""
    return [days for days, _ in WINDOWS if day > today - days]


def money(conn, merchant_id, now, from_seq, sandbox_mode) -> tuple[list[AssetFigures], dict]:
    """(per asset id: paid and refunded over the windows, and paid per day; in test mode
    (`sandbox_mode`) the sandbox payments, processes completed without a live payment: {days:
    (count, amount)} over the windows and per day)."""
    today = now // DAY
    since = (today - 29) * DAY
    assets = {(a.network_id, a.contract.lower()): a for a in payment_rows.list_assets(conn)}
    by_id = {}

    def figures(asset_id, symbol):
        return by_id.setdefault(asset_id, AssetFigures(asset_id, symbol))

    for network_id, token, day, count, base in overview_rows.paid_by_day(conn, merchant_id, since):
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
    for asset_id, decimals, day, _, base in overview_rows.refunded_by_day(conn, merchant_id, since):
        found = figures(asset_id, symbols.get(asset_id, asset_id))
        for days in _windows(day, today):
            found.refunded[days] += _units(base, decimals)
    other = {"daily": {}, **{days: (0, Decimal(0)) for days, _ in WINDOWS}}
    sandbox = overview_rows.completed_without_transfer_by_day(conn, merchant_id, since, from_seq) \
        if sandbox_mode else ()
    for day, count, amount in sandbox:
        other["daily"][day] = amount
        for days in _windows(day, today):
            other[days] = (other[days][0] + count, other[days][1] + amount)
    return sorted(by_id.values(), key=lambda f: (-f.paid[30], f.id)), other


# --- The chart ------------------------------------------------------------------------------------

WIDTH, HEIGHT, PAD = 600, 160, 24


def chart(daily: dict, today: int, label: str) -> dict:
    """An SVG bar chart of the last 30 days (oldest left) from {day: amount}: the template draws
    `bars` (x, y, width, height, title) in a viewBox of WIDTH x HEIGHT, scaled to the largest day,
    with `top` (that amount) and the first and last days' dates beside."""
    days = [today - 29 + i for i in range(30)]
    top = max((daily.get(d, Decimal(0)) for d in days), default=Decimal(0))
    step = (WIDTH - PAD) / 30
    bars = []
    for i, day in enumerate(days):
        amount = daily.get(day, Decimal(0))
        height = float(amount / top) * (HEIGHT - PAD) if top else 0
        height = max(height, 1.0) if amount else 0
        bars.append({"x": round(PAD + i * step + 1, 1), "y": round(HEIGHT - PAD - height, 1),
                     "width": round(step - 2, 1), "height": round(height, 1),
                     "title": f"{day_text(day)}: {text(amount)} {label}"})
    return {"bars": bars, "top": text(top), "first": day_text(days[0]), "last": day_text(days[-1]),
            "width": WIDTH, "height": HEIGHT, "base": HEIGHT - PAD, "pad": PAD,
            "label": f"{label} paid per day, last 30 days"}


def statuses(conn, merchant_id, now, from_seq) -> list[tuple[str, int]]:
    counts = overview_rows.counts_by_status(conn, merchant_id, now, from_seq)
    return [(status, counts.get(status, 0)) for status in STATUSES]
