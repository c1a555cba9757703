"""The overview (`/dashboard/overview`, where a login lands): the figures of
app/domain/overview.py, each a link to the list it counts (sums of process amounts in their
currency, app/core/currency.py display), and a chart per asset (and per currency of the sandbox
payments) of the last 30 days.

The chart is drawn here as SVG (`chart`): a few lines of our own rather than a charting library,
since one bar chart of 30 days needs no more, and no script runs to see it."""
from decimal import Decimal

from flask import g, render_template

from app.clock import now
from app.console.pages import bp
from app.console.security import login_required
from app.core import currency
from app.db import get_db
from app.domain import overview
from app.domain.overview import day_text, text


@bp.get("/overview")
@login_required
def overview_page():
    found = overview.of_merchant(get_db(), g.merchant, now())
    today, assets = found.today, found.assets
    dates = {days: day_text(today - days + 1) for days, _ in overview.WINDOWS}
    return render_template(
        "dashboard/overview.html", assets=assets, windows=overview.WINDOWS, dates=dates,
        charts={a.id: chart(a.daily, today, a.symbol) for a in assets},
        completed=found.completed, sandbox=found.sandbox,
        sandbox_charts={c.code: chart(c.daily, today, c.code,
                                      lambda amount, code=c.code: currency.display(amount, code),
                                      "completed in the sandbox per day")
                        for c in found.sandbox},
        text=text, statuses=found.statuses, partly=found.partly, partly_more=found.partly_more,
        overpaid=found.overpaid, overpaid_more=found.overpaid_more, waiting=found.waiting,
        failing=found.failing, since=day_text(today - 29))


WIDTH, HEIGHT, PAD = 600, 160, 24


def chart(daily: dict, today: int, label: str, shown=None, what="paid per day") -> dict:
    """An SVG bar chart of the last 30 days (oldest left) from {day: amount}: the template draws
    `bars` (x, y, width, height, title) in a viewBox of WIDTH x HEIGHT, scaled to the largest day,
    with `top` (that amount) and the first and last days' dates beside. `shown(amount)`: an amount
    as the titles say it (default: the figure and `label`, a token's symbol); `what`: the bars."""
    top_text = shown or text
    if shown is None:
        def shown(amount):
            return f"{text(amount)} {label}"
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
                     "title": f"{day_text(day)}: {shown(amount)}"})
    return {"bars": bars, "top": top_text(top), "first": day_text(days[0]),
            "last": day_text(days[-1]), "width": WIDTH, "height": HEIGHT, "base": HEIGHT - PAD,
            "pad": PAD, "label": f"{label} {what}, last 30 days",
            "days": [day_text(days[i])[5:] for i in (0, 14, 29)]}  # the axis: first, middle, last
