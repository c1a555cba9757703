"""What every page of the console shares: the blueprint, the template filters and context, the
post-redirect-get notices, confirmation pages, the meta refresh while an event is due, a process
by its id (or the 404 page), the names people read for assets and networks. The pages themselves
are one module per page group (app/console/__init__.py).
"""
from datetime import UTC, datetime

from flask import Blueprint, g, redirect, render_template, request, url_for

from app.console.security import PageError, not_found
from app.core import currency
from app.core.money import format_units
from app.db import get_db
from app.domain import processes, setup
from app.web.http import NotAscii, ascii_int, ascii_text, parse_process_id

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard", template_folder="templates",
               static_folder="../static/console", static_url_path="/static")

@bp.app_template_filter("when")
def when(ts):
    """A timestamp as people read it: UTC, to the second."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# A process's amount in its currency, as people of that currency read it (never rounded).
bp.add_app_template_filter(currency.display, "priced")


def iso_when(text):
    """An ISO 8601 UTC time of the API ("2026-11-22T10:00:00Z") as the `when` filter shows it."""
    if not text:
        return "-"
    return when(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())


@bp.app_context_processor
def _context():
    return {"csrf_token": getattr(g, "csrf_token", None), "user": getattr(g, "user", None),
            "merchant": getattr(g, "merchant", None)}


# --- After a change: POST, then redirect, then GET (PRG) ------------------------------------------
# A change that succeeded answers 303 to the page it changed, with `done=<what>` in its address: the
# page then says what happened, and a reload or Back never sends the form again. The address only
# selects one of the service's own texts below by its key (an unknown key shows nothing); no words
# of an address go into a notice, only a count where the text holds one (never a secret: a rolled
# key is answered in place).
NOTICES = {
    "cancelled": "The process is cancelled; its process.cancelled event is queued.",
    "resent": "The event is queued for delivery again; its attempt shows below when the delivery"
              " worker has made it.",
    "refund-cancelled": "The refund is cancelled.",
    "named": "The transaction is named for this refund: it completes once that transaction is"
             " confirmed.",
    "tolerance": "Underpayment tolerance saved: payments confirmed from now on complete at the"
                 " amount due less it.",
    "url-set": "Webhook URL saved.",
    "url-unresolved": "Webhook URL saved, but its host name does not resolve now: deliveries to it"
                      " are refused until it does (each delivery checks it again).",
    "url-removed": "Webhook URL removed.",
    "test": "Test event queued: its result shows below when the delivery worker has sent it.",
    "replayed": "{count} failed event(s) queued for delivery again.",
    "endpoint-saved": "Endpoint saved: its next attempts use it.",
    "endpoint-unresolved": "Endpoint saved, but its host name does not resolve now: deliveries to"
                           " it are refused until it does (each delivery checks it again).",
    "endpoint-disabled": "Endpoint disabled: its pending deliveries are cancelled (replay resends"
                         " them).",
    "endpoint-enabled": "Endpoint enabled: events from now on go to it.",
    "endpoint-deleted": "Endpoint deleted: its pending deliveries are cancelled, its history kept.",
    "accepted": "The transfer is accepted as payment: it counts in the amount paid, and the"
                " process's event is queued.",
    "revoked": "The key is revoked: it stopped working now.",
    "currency": "Currency saved: processes created from now on whose preorder names none are priced"
                " in it; those made before keep theirs.",
    "collection": "The collection's transaction is recorded: it is listed below, confirmed once the"
                  " network's confirmations are reached.",
    "payout": "Payout address saved: processes confirmed from now on forward to it; deposit"
              " addresses already handed out keep paying the one they were made for.",
}

# A change saved with a warning of the service's: the notice that says it. The warning's own words
# never go into the address (a page would show whatever an address says).
WARNED = {"url-set": "url-unresolved", "endpoint-saved": "endpoint-unresolved"}


def done(endpoint, what, warning=None, **values):
    """The 303 after a change `what` (a key of NOTICES) to `endpoint`; with a `warning`, the notice
    of `what` that carries one (WARNED)."""
    if warning:
        what = WARNED.get(what, what)
    return redirect(url_for(endpoint, **values, done=what), 303)


def notice():
    """The notice of the change this GET follows (`done`, a key of NOTICES), or None. A count is
    read as ASCII digits (a `count` of other digits is the 400 page)."""
    text = NOTICES.get(request.args.get("done", ""))
    if text and "{count}" in text:
        count = ascii_value(request.args.get("count", ""), "count", number=True)
        text = text.format(count=count) if count is not None else None
    return text


def ascii_value(value, field, *, number=False):
    """A path, query or form value read as ASCII (app/web/http.py): the value, or with `number`
    the whole number its ASCII digits 0-9 write (None for other ASCII text). A character outside
    ASCII (`³`, `٣`) is the console's 400 page naming `field`, never read as what it resembles."""
    try:
        return ascii_int(value, field) if number else ascii_text(value, field)
    except NotAscii as e:
        raise PageError(400, "Not understood", f"{e} Check the address or the form, and try"
                        " again.") from None


def confirm(title, message, action, button, back, danger=True, fields=None):
    """A confirmation page: a POST form to `action` (its button `button`) and a way back. Works
    without script; a viewer never reaches it (owner_required). `fields`: {name: value} posted
    again with it (hidden), for a form confirmed after a first post (a payout address)."""
    return render_template("dashboard/confirm.html", title=title, message=message, action=action,
                           button=button, back=back, danger=danger, fields=fields or {})


@bp.app_template_filter("units")
def units(refund):
    """A refund's amount in token units."""
    return format_units(refund.amount, refund.decimals)


def process_or_404(process_id):
    parsed = parse_process_id(process_id)
    if parsed is None:
        raise not_found()
    try:
        return processes.get(get_db(), g.merchant.id, parsed)
    except processes.ProcessNotFound:
        raise not_found() from None


# While an event is due for the delivery worker (queued at most this long ago: a worker that is
# down does not keep a page reloading for ever), its page reloads every REFRESH_SECONDS, by a meta
# refresh to its own address: the attempt's outcome shows when it comes, without a script.
REFRESH_SECONDS = 2
REFRESH_WINDOW_SECONDS = 60


def refresh(url, events, current):
    """The page's meta refresh (seconds, address), or None."""
    due = any(e.status == "pending" and e.next_attempt_at is not None
              and current - REFRESH_WINDOW_SECONDS <= e.next_attempt_at <= current for e in events)
    return (REFRESH_SECONDS, url) if due else None


def names():
    """(asset symbols by (asset id, network id), network names by id), as people read them."""
    return ({(a.id, a.network_id): a.symbol for a in setup.list_assets(get_db())},
            {n.id: n.name for n in setup.list_networks(get_db())})


def symbol(asset_id, network_id):
    asset = setup.asset(get_db(), asset_id, network_id)
    return asset.symbol if asset else asset_id


@bp.get("/<path:anything>")
def unknown(anything):
    raise not_found()
