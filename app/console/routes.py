"""The console's pages (API.md "The merchant console"). Every page but the login needs a session
(security.login_required); every change needs the owner role and the form's CSRF token.

  GET  /dashboard/login, POST /dashboard/login, POST /dashboard/logout
  GET  /dashboard/                          processes: filters, search, pages of 50 (keyset)
  GET  /dashboard/processes.csv             what the filters show, streamed
  GET  /dashboard/processes/<id>            one process: timeline, payment, events and attempts
  POST /dashboard/processes/<id>/cancel     POST .../events/<eventId>/resend
  GET  /dashboard/processes/<id>/refund     the refund form; POST it: a pending refund
  GET  /dashboard/processes/<id>/refunds/<refundId>   its QR code and wallet button; POST .../cancel,
       POST .../transaction (the hash that paid it)
  GET  /dashboard/webhooks                  the URL, a test event, the failing deliveries
  POST /dashboard/webhooks/url, /test, /replay-failed
  GET  /dashboard/keys                      keys; POST /dashboard/keys/roll, /roll-webhook-secret
  GET  /dashboard/payouts                   payout address, what waits per network, collecting it
"""
import csv
import io
import json
from datetime import datetime, timezone
from decimal import Decimal

from flask import (Blueprint, Response, current_app, g, redirect, render_template, request, send_file,
                   stream_with_context, url_for)

from app import collect, outbox, merchants, payments, processes, refunds, unexpected
from app.chain import rpc
from app.chain.rpc import transfer_calldata
from app.clock import now
from app import overview
from app.console import accounts, security
from app import wallet_collections as wallet_payouts
from app.console.security import PageError, login_required, not_found, owner_required
from app.data import merchants as merchant_rows
from app.data import outbox as event_rows
from app.data import overview as overview_rows
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data import processes as process_rows
from app.db import get_db
from app.http import parse_process_id
from app.jsonutil import dumps_pretty, loads
from app.records import STATUSES
from app.money import format_units
from app.representation import iso, payment_json, refund_json
from app.routes.button import load_button_script

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard", template_folder="templates",
               static_folder="../static/console", static_url_path="/static")

PAGE_SIZE = 50
CSV_BATCH = 500
# The payment button's QR encoder and the console's renderer of <img data-qr>, in one scope.
QR_SCRIPT = load_button_script(names=("qr.js", "console/qr-images.js"))
CSV_COLUMNS = ("processId", "status", "amount", "livemode", "createdAt", "updatedAt", "expiresAt",
               "metadata", "assetId", "networkId", "amountDue", "amountPaid", "amountRefunded", "marks",
               "transferTxHashes", "transferLogIndexes", "transferBlockNumbers", "transferBlockHashes")


@bp.app_template_filter("when")
def _when(ts):
    """A timestamp as people read it: UTC, to the second."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@bp.app_context_processor
def _context():
    return {"csrf_token": getattr(g, "csrf_token", None), "user": getattr(g, "user", None),
            "merchant": getattr(g, "merchant", None)}


# --- After a change: POST, then redirect, then GET (PRG) -------------------------------------------
# A change that succeeded answers 303 to the page it changed, with `done=<what>` in its address: the
# page then says what happened, and a reload or Back never sends the form again. Only fixed texts
# and the few values below go into an address (never a secret: a rolled key is answered in place).
NOTICES = {
    "cancelled": "The process is cancelled; its process.cancelled event is queued.",
    "resent": "The event is queued for delivery again; its attempt shows below when the delivery"
              " worker has made it.",
    "refund-cancelled": "The refund is cancelled.",
    "named": "The transaction is named for this refund: it completes once that transaction is"
             " confirmed.",
    "tolerance": "Underpayment tolerance saved: payments confirmed from now on complete at the amount"
                 " due less it.",
    "url-set": "Webhook URL saved.",
    "url-removed": "Webhook URL removed.",
    "test": "Test event queued: its result shows below when the delivery worker has sent it.",
    "replayed": "{count} failed event(s) queued for delivery again.",
    "accepted": "The transfer is accepted as payment: it counts in the amount paid, and the"
                " process's event is queued.",
    "revoked": "The key is revoked: it stopped working now.",
    "collection": "The collection's transaction is recorded: it is listed below, confirmed once the"
                  " network's confirmations are reached.",
}


def _done(endpoint, what, **values):
    return redirect(url_for(endpoint, **values, done=what), 303)


def _notice():
    """The notice of the change this GET follows (`done`), or None."""
    text = NOTICES.get(request.args.get("done", ""))
    if text and "{count}" in text:
        count = request.args.get("count", "")
        text = text.format(count=int(count)) if count.isdigit() and len(count) < 10 else None
    if text and request.args.get("warning"):
        text += f" Careful: {request.args['warning'][:300]}."
    return text


def _confirm(title, message, action, button, back, danger=True):
    """A confirmation page: a POST form to `action` (its button `button`) and a way back. Works
    without script; a viewer never reaches it (owner_required)."""
    return render_template("dashboard/confirm.html", title=title, message=message, action=action,
                           button=button, back=back, danger=danger)


# --- Login -----------------------------------------------------------------------------------------

def _login_page(status=200, error=None, email="", headers=None):
    token = security.new_login_csrf()
    body = render_template("dashboard/login.html", login_csrf=token, error=error, email=email)
    response = Response(body, status=status, headers=headers)
    security.set_cookie(response, security.LOGIN_CSRF_COOKIE, token, samesite="Strict")
    return response


@bp.get("/login")
def login():
    if accounts.session(get_db(), security.read_cookie(security.SESSION_COOKIE), now()) is not None:
        return redirect(url_for("dashboard.overview_page"))
    return _login_page()


@bp.post("/login")
def login_submit():
    if not accounts.same_token(security.read_cookie(security.LOGIN_CSRF_COOKIE), request.form.get("csrf_token")):
        raise security.csrf_refused()
    email = request.form.get("email", "")
    try:
        token, _ = accounts.log_in(get_db(), email=email, password=request.form.get("password", ""),
                                   client=security.client_address(), now=now(),
                                   session_hours=security.session_hours())
    except accounts.LoginRefused as e:
        minutes = -(-e.retry_after // 60)
        if e.locked:
            message = (f"Too many failed logins: this account is locked for {minutes} more minute(s)."
                       " Every attempt is refused until then, even with the right password.")
        else:
            message = f"Too many failed logins: wait {e.retry_after} second(s) before trying again."
        return _login_page(429, message, email, {"Retry-After": str(e.retry_after)})
    except accounts.BadCredentials:
        return _login_page(401, "Wrong email or password.", email)
    except accounts.BadEmail:
        return _login_page(400, f"An email address has at most {accounts.MAX_EMAIL_LENGTH}"
                           " characters.", "")
    response = redirect(url_for("dashboard.overview_page"), 303)
    security.session_cookie(response, token, security.session_hours() * 3600)
    security.delete_cookie(response, security.LOGIN_CSRF_COOKIE)
    return response


@bp.post("/logout")
@login_required
def logout():
    accounts.log_out(get_db(), security.read_cookie(security.SESSION_COOKIE))
    response = redirect(url_for("dashboard.login"), 303)
    security.delete_cookie(response, security.SESSION_COOKIE)
    return response


# --- Overview -------------------------------------------------------------------------------------

def _partly_paid(views) -> list[str]:
    """The processes whose confirmed money is above zero and below what is due (exactly)."""
    found = []
    for process_id, view in views.items():
        paid = sum(t.amount for t in view.transfers if t.status == "confirmed")
        if 0 < paid < view.payment.amount_due:
            found.append(process_id)
    return found


def _waiting(conn, since):
    """What waits in the merchant's deposit addresses per network and token, as the database knows
    it (overview_rows.uncollected), from the day before each network's last collection on (or the
    30 days' start): a list of dicts for the template."""
    networks = {n.id: n for n in payment_rows.list_networks(conn)}
    symbols = {(a.network_id, a.contract.lower()): a for a in payment_rows.list_assets(conn)}
    last = overview_rows.last_collection(conn, g.merchant.id)
    found = []
    for network_id in payout_rows.networks_with_factory(conn):
        start = max(since, last.get(network_id, 0) - overview.DAY)
        for token, addresses, base in overview_rows.uncollected(conn, g.merchant.id, network_id, start):
            asset = symbols.get((network_id, token.lower()))
            found.append({"network": networks[network_id].name, "network_id": network_id,
                          "amount": overview.text(overview._units(base, asset.decimals)) if asset else str(base),
                          "symbol": asset.symbol if asset else token, "addresses": addresses,
                          "since": overview.day_text(start // overview.DAY)})
    return found


def _partly_count(conn, candidates) -> int:
    count, unsure = overview_rows.partly_paid(conn, candidates)
    return count + (len(_partly_paid(payment_rows.views_of(conn, unsure))) if unsure else 0)


@bp.get("/overview")
@login_required
def overview_page():
    conn, current = get_db().connection(), int(now())
    today = current // overview.DAY
    since = (today - 29) * overview.DAY
    from_seq = overview_rows.seq_since(conn, since)
    assets, other = overview.money(conn, g.merchant.id, current, from_seq, not g.merchant.livemode)
    candidates = overview_rows.partly_paid_candidates(conn, g.merchant.id, since)
    dates = {days: overview.day_text(today - days + 1) for days, _ in overview.WINDOWS}
    return render_template(
        "dashboard/overview.html", assets=assets, other=other, windows=overview.WINDOWS, dates=dates,
        charts={a.id: overview.chart(a.daily, today, a.symbol) for a in assets},
        other_chart=overview.chart(other["daily"], today, "") if other[30][0] else None,
        text=overview.text, statuses=overview.statuses(conn, g.merchant.id, current, from_seq),
        partly=_partly_count(conn, candidates),
        waiting=_waiting(conn, since), failing=overview_rows.failing_deliveries(conn, g.merchant.id),
        since=overview.day_text(today - 29))


# --- Processes -------------------------------------------------------------------------------------

def _date(text, name, errors):
    """A YYYY-MM-DD date as unix seconds at its start (UTC), or None."""
    if not text:
        return None
    try:
        return int(datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=timezone.utc).timestamp())
    except ValueError:
        errors.append(f"{name}: enter a date as YYYY-MM-DD.")
        return None


# The list's filters on money: (value of `money`, its label). A new filter is one more entry here
# and in process_rows.CONDITIONS.
MONEY_FILTERS = [("paid", "Paid (money confirmed)"), ("partly", "Partly paid"), ("refunded", "Refunded")]


def _filters():
    """The list's filters from the query string: (filters for process_rows.list_page, form values,
    error messages). An impossible combination (another mode than the merchant's) gives None."""
    args = request.args
    form = {name: args.get(name, "").strip()
            for name in ("status", "mode", "from", "to", "q", "money", "asset", "network",
                         "unexpected")}
    errors, found = [], {}
    conditions = []
    if form["money"] and form["money"] not in dict(MONEY_FILTERS):
        errors.append("money: choose one of the listed filters.")
    elif form["money"]:
        conditions.append((form["money"], None))
    if form["unexpected"]:  # the checkbox "has unexpected transfers"
        conditions.append(("unexpected", None))
    for name in ("asset", "network"):
        if form[name]:
            conditions.append((name + "=", form[name]))
    if conditions:
        found["conditions"] = conditions
    if form["status"] and form["status"] not in STATUSES:
        errors.append("status: choose one of the listed statuses.")
    elif form["status"]:
        found["status"] = form["status"]
    created_from = _date(form["from"], "From", errors)
    created_to = _date(form["to"], "To", errors)
    if created_from is not None:
        found["created_from"] = created_from
    if created_to is not None:
        found["created_before"] = created_to + 86_400  # the whole day given
    if form["mode"] not in ("", "test", "live"):
        errors.append("mode: choose test or live.")
    elif form["mode"] and (form["mode"] == "live") != g.merchant.livemode:
        found = None  # a merchant's processes all have its mode
    if found is not None and form["q"]:
        found["value"] = process_rows.search_value(form["q"])
        process_id = parse_process_id(form["q"])
        if process_id is not None:  # a process id, else a metadata value that looks like one
            found["process_id"] = process_id
    return found, form, errors


def _page(found, *, limit, before=None):
    """(processes, has_more) for the filters, newest first, before the process `before`. "Partly
    paid" is checked exactly on what SQL found (money confirmed, not completed): below what is due."""
    if found is None or not any(name == "partly" for name, _ in found.get("conditions", ())):
        return _sql_page(found, limit=limit, before=before)
    kept = []
    while True:
        batch, more = _sql_page(found, limit=limit, before=before)
        partly = set(_partly_paid(payments.views(get_db(), batch)))
        kept += [p for p in batch if p.id in partly]
        if len(kept) >= limit or not more:
            return kept[:limit], len(kept) > limit or more
        before = batch[-1].id


def _sql_page(found, *, limit, before=None):
    if found is None:
        return [], False
    found = dict(found)
    process_id = found.pop("process_id", None)
    if process_id is not None:  # that one process, if it is this merchant's
        try:
            process = processes.get(get_db(), g.merchant.id, process_id)
        except processes.ProcessNotFound:
            pass
        else:
            return [process] if _matches(process, found) else [], False
    before_seq = None
    if before:
        anchor = parse_process_id(before)
        try:
            before_seq = processes.get(get_db(), g.merchant.id, anchor).seq if anchor else None
        except processes.ProcessNotFound:
            before_seq = None
        if before_seq is None:
            raise PageError(400, "No such page", "The page asked for does not exist: start from the first page.")
    return process_rows.list_page(get_db().connection(), now=now(), limit=limit, merchant_id=g.merchant.id,
                                  before_seq=before_seq, **found)


def _matches(process, found):
    """The other filters, for the one process a process-id search found."""
    if not (found.get("status") in (None, process.effective_status(now()))
            and process.created_at >= found.get("created_from", process.created_at)
            and process.created_at < found.get("created_before", process.created_at + 1)):
        return False
    conditions = found.get("conditions")
    if not conditions:
        return True
    if not process_rows.meets(get_db().connection(), process.id, conditions):
        return False
    return ("partly", None) not in conditions or bool(_partly_paid(payments.views(get_db(), [process])))


def _summary(metadata):
    """A short line of a process's metadata for the list."""
    text = ", ".join(f"{k}: {v}" for k, v in json.loads(metadata).items()
                     if isinstance(v, (str, int, float)) and not isinstance(v, bool))
    text = text.replace("\x00", "\ufffd")  # HTML has no NUL: what a browser would show
    return text if len(text) <= 80 else text[:79] + "…"


def _names():
    """(asset symbols by (asset id, network id), network names by id), as people read them."""
    conn = get_db().connection()
    return ({(a.id, a.network_id): a.symbol for a in payment_rows.list_assets(conn)},
            {n.id: n.name for n in payment_rows.list_networks(conn)})


def _money(batch, names=None) -> dict:
    """Per process of `batch` with a live payment: what was paid (confirmed) and refunded
    (completed), in token units, on which asset and network, and its marks: {process id: dict}."""
    if not batch:
        return {}
    symbols, networks = names or _names()
    views = payments.views(get_db(), batch)
    refunded = refunds.of_processes(get_db(), batch)
    current, found = now(), {}
    for p in batch:
        view = views.get(p.id)
        if view is None:
            continue
        pay = view.payment
        counted = [t for t in view.transfers if t.status == "confirmed"]
        paid = sum(t.amount for t in counted)
        # A refund is in its own token's units: the payment's, unless the choice changed since.
        back = sum(Decimal(r.amount).scaleb(-r.decimals) for r in refunded.get(p.id, ())
                   if r.status == "completed")
        marks = []
        if 0 < paid < pay.amount_due and p.effective_status(current) != "completed":
            marks.append("partly paid")
        if back:
            marks.append("refunded" if back >= Decimal(paid).scaleb(-pay.decimals) else "partly refunded")
        found[p.id] = {
            "asset_id": pay.asset_id, "network_id": pay.network_id,
            "symbol": symbols.get((pay.asset_id, pay.network_id), pay.asset_id),
            "network": networks.get(pay.network_id, pay.network_id),
            "due": format_units(pay.amount_due, pay.decimals), "paid": format_units(paid, pay.decimals),
            "refunded": overview.text(back), "marks": marks, "proof": _chain_proof(counted)}
    return found


@bp.get("/")
@login_required
def processes_page():
    found, form, errors = _filters()
    items, has_more = ([], False) if errors else _page(found, limit=PAGE_SIZE, before=request.args.get("before"))
    query = {k: v for k, v in form.items() if v}
    current = now()
    money = _money(items)
    rows = [{"process": p, "status": p.effective_status(current), "summary": _summary(p.metadata),
             "money": money.get(p.id)} for p in items]
    symbols, networks = _names()
    assets = sorted({(asset_id, symbol) for (asset_id, _), symbol in symbols.items()})
    next_url = url_for("dashboard.processes_page", **query, before=items[-1].id) if has_more else None
    return render_template("dashboard/processes.html", rows=rows, form=form, errors=errors,
                           statuses=STATUSES, next_url=next_url, money_filters=MONEY_FILTERS,
                           assets=assets, networks=sorted(networks.items()),
                           first_page=bool(request.args.get("before")),
                           first_url=url_for("dashboard.processes_page", **query),
                           csv_url=url_for("dashboard.processes_csv", **query)), 400 if errors else 200


# The worker's heartbeat, where gunicorn_workers.py's worker classes put one (not under flask run).
HEARTBEAT = "preorder.heartbeat"


@bp.get("/processes.csv")
@login_required
def processes_csv():
    """Streamed without a Content-Length: over HTTP/1.1 (and from nginx, proxy_http_version 1.1)
    the body is chunked, so an export cut short (a killed worker, an error) lacks the last chunk
    and no client takes it for a whole file. The worker's heartbeat after each batch keeps
    gunicorn's timeout from killing an export that is making progress (docs/console.md)."""
    found, _, errors = _filters()
    if errors:
        raise PageError(400, "Export refused", " ".join(errors))
    heartbeat = request.environ.get(HEARTBEAT, lambda: None)

    def rows():
        """The rows in batches of CSV_BATCH (keyset): memory stays flat however many there are."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(CSV_COLUMNS)
        before, names = None, _names()
        while True:
            batch, more = _page(found, limit=CSV_BATCH, before=before)
            current = now()
            money = _money(batch, names)  # what was paid against what was due, and refunded
            for p in batch:
                writer.writerow((p.id, p.effective_status(current), p.amount, "true" if p.livemode else "false",
                                 iso(p.created_at), iso(p.effective_updated_at(current)), iso(p.expires_at),
                                 p.metadata, *_money_columns(money.get(p.id))))
            yield out.getvalue()
            heartbeat()
            out.seek(0)
            out.truncate()
            if not more:
                return
            before = batch[-1].id

    return Response(stream_with_context(rows()), mimetype="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="processes.csv"'})


def _money_columns(money):
    """The CSV's payment columns: asset, network, amount due, confirmed amount paid and completed
    refunds, in token units (a payment completed under the merchant's tolerance shows paid below
    due), the list's marks joined by "; ", and the chain proof (`_chain_proof`); empty without a
    live payment."""
    if money is None:
        return ("",) * 10
    return (money["asset_id"], money["network_id"], money["due"], money["paid"], money["refunded"],
            "; ".join(money["marks"]), *money["proof"])


def _chain_proof(counted):
    """The CSV's chain proof of what `amountPaid` counts: per confirmed transfer (an accepted
    unexpected one included), its transaction hash, log index, block number and block hash, each
    column a space-separated list in the same order."""
    return (" ".join(t.tx_hash for t in counted), " ".join(str(t.log_index) for t in counted),
            " ".join(str(t.block_number) for t in counted), " ".join(t.block_hash for t in counted))


def _process_or_404(process_id):
    parsed = parse_process_id(process_id)
    if parsed is None:
        raise not_found()
    try:
        return processes.get(get_db(), g.merchant.id, parsed)
    except processes.ProcessNotFound:
        raise not_found() from None


def _timeline(process, view, event_list, current):
    """What happened to a process, oldest first: (time, title, detail, kind)."""
    items = [(process.created_at, "Created", f"Amount {process.amount}", "created")]
    for t in view.transfers if view is not None else ():
        amount = format_units(t.amount, view.payment.decimals)
        detail = f"{amount} in block {t.block_number}, tx {t.tx_hash}"
        items.append((t.seen_at, "Transfer seen", detail, "transfer"))
        if t.confirmed_at is not None:
            items.append((t.confirmed_at, "Transfer confirmed", detail, "ok"))
    for event, attempts in event_list:
        items.append((event.created_at, f"Event {event.type}", f"delivery {event.status.replace('_', ' ')}",
                      "event"))
        for a in attempts:
            outcome = f"HTTP {a.status_code}" if a.status_code is not None else "no answer"
            detail = f"{outcome} in {a.duration_ms} ms" + (f": {a.error}" if a.error else "")
            items.append((a.attempted_at, f"Delivery attempt of {event.type}", detail,
                          "ok" if a.error is None else "failed"))
    status = process.effective_status(current)
    if status == "expired" and process.status == "pending":
        items.append((process.expires_at, "Expired", "", "final"))
    return sorted(items, key=lambda item: item[0])  # stable: same-second items keep their order


# While an event is due for the delivery worker (queued at most this long ago: a worker that is
# down does not keep a page reloading for ever), its page reloads every REFRESH_SECONDS, by a meta
# refresh to its own address: the attempt's outcome shows when it comes, without a script.
REFRESH_SECONDS = 2
REFRESH_WINDOW_SECONDS = 60


def _refresh(url, events, current):
    """The page's meta refresh (seconds, address), or None."""
    due = any(e.status == "pending" and e.next_attempt_at is not None
              and current - REFRESH_WINDOW_SECONDS <= e.next_attempt_at <= current for e in events)
    return (REFRESH_SECONDS, url) if due else None


@bp.get("/processes/<process_id>")
@login_required
def process_page(process_id, notice=None, error=None, status=200):
    process = _process_or_404(process_id)
    notice = notice or _notice()
    db, current = get_db(), now()
    view = payments.view(db, process)
    payment = loads(payment_json(view).encode()) if view is not None else None
    event_list = [outbox.get_with_attempts(db, e.id) for e in outbox.for_process(db, process.id)]
    refresh = _refresh(url_for("dashboard.process_page", process_id=process.id),
                       [event for event, _ in event_list], current)
    refundable = refunds.refundable(db, g.merchant.id, process.id, current)
    return render_template(
        "dashboard/process.html", process=process, status=process.effective_status(current),
        updated_at=process.effective_updated_at(current), payment=payment,
        symbol=_symbol(view.payment.asset_id, view.payment.network_id) if view else "",
        network_name=_names()[1].get(view.payment.network_id, view.payment.network_id) if view else "",
        refunds=refunds.list_for_process(db, g.merchant.id, process.id),
        can_refund=refundable not in (None, "0"),
        metadata=dumps_pretty(loads(process.metadata.encode())), event_list=event_list,
        timeline=_timeline(process, view, event_list, current), notice=notice, error=error,
        refresh=refresh, unexpected=_unexpected_rows(payment),
    ), status


# --- Unexpected transfers (templates/dashboard/_unexpected.html) -----------------------------------

def _unexpected_rows(payment):
    """The payment's unexpected transfers as the partial shows them: each with its network's name
    and whether its token is a registered asset there (only those can be accepted as payment)."""
    if not payment or not payment["unexpectedTransfers"]:
        return []
    conn = get_db().connection()
    names = {n.id: n.name for n in payment_rows.list_networks(conn)}
    rows = []
    for u in payment["unexpectedTransfers"]:
        registered = payment_rows.asset_with_contract(conn, u["networkId"], u["tokenContract"])
        rows.append(dict(u, network_name=names.get(u["networkId"], u["networkId"]),
                         registered=registered is not None))
    return rows


@bp.post("/processes/<process_id>/unexpected/<transfer>/accept")
@login_required
@owner_required
def accept_unexpected(process_id, transfer):
    """Accept an unexpected transfer of a registered asset as payment (app/unexpected.py)."""
    process = _process_or_404(process_id)
    try:
        unexpected.accept(get_db(), g.merchant.id, process.id, transfer, f"console {g.user.email}",
                          now())
    except unexpected.TransferNotFound:
        raise not_found() from None
    except processes.InvalidState as e:
        return process_page(process.id, error=str(e), status=409)
    return _done("dashboard.process_page", "accepted", process_id=process.id, _anchor="unexpected")


@bp.get("/processes/<process_id>/cancel")
@login_required
@owner_required
def confirm_cancel_process(process_id):
    process = _process_or_404(process_id)
    back = url_for("dashboard.process_page", process_id=process.id)
    if process.effective_status(now()) != "pending":
        return redirect(back, 303)
    return _confirm(f"Cancel process {process.id}?",
                    f"The customer can no longer pay its {process.amount}; a process.cancelled event"
                    " is sent to your webhook. A cancelled process cannot be reopened.",
                    url_for("dashboard.cancel_process", process_id=process.id), "Cancel", back)


@bp.post("/processes/<process_id>/cancel")
@login_required
@owner_required
def cancel_process(process_id):
    process = _process_or_404(process_id)
    try:
        processes.cancel(get_db(), process.id, now(), merchant_id=g.merchant.id)
    except processes.InvalidState as e:
        return process_page(process.id, error=str(e), status=409)
    return _done("dashboard.process_page", "cancelled", process_id=process.id)


@bp.post("/processes/<process_id>/events/<event_id>/resend")
@login_required
@owner_required
def resend_event(process_id, event_id):
    process = _process_or_404(process_id)
    if event_id not in {e.id for e in outbox.for_process(get_db(), process.id)}:
        raise not_found()
    try:
        outbox.replay(get_db(), event_id, now())
    except outbox.NotReplayed as e:
        return process_page(process.id, error=str(e), status=409)
    return _done("dashboard.process_page", "resent", process_id=process.id, _anchor=event_id)


# --- Refunds ---------------------------------------------------------------------------------------

def _symbol(asset_id, network_id):
    asset = payment_rows.get_asset(get_db().connection(), asset_id, network_id)
    return asset.symbol if asset else asset_id


@bp.app_template_filter("units")
def _units(refund):
    """A refund's amount in token units."""
    return format_units(refund.amount, refund.decimals)


def _refund_form(process, form, errors=None, error=None, status=200):
    view = payments.view(get_db(), process)
    remaining = refunds.refundable(get_db(), g.merchant.id, process.id, now())
    if view is None or remaining is None:
        return process_page(process.id, error="This process has no confirmed payment to refund.", status=409)
    payers = {t.from_address for t in view.transfers if t.status == "confirmed"}
    payer = payers.pop() if len(payers) == 1 else None
    if not form:  # a new form: what may still be refunded, to the address that paid when only one did
        form = {"amount": remaining, "address": payer or "", "reason": ""}
    return render_template("dashboard/refund_new.html", process=process, form=form, errors=errors or {},
                           error=error, remaining=remaining, payer=payer,
                           network=_names()[1].get(view.payment.network_id, view.payment.network_id),
                           symbol=_symbol(view.payment.asset_id, view.payment.network_id)), status


@bp.get("/processes/<process_id>/refund")
@login_required
@owner_required
def refund_form(process_id):
    return _refund_form(_process_or_404(process_id), None)


@bp.post("/processes/<process_id>/refund")
@login_required
@owner_required
def create_refund(process_id):
    process = _process_or_404(process_id)
    form = {name: request.form.get(name, "").strip() for name in ("amount", "address", "reason")}
    try:
        refund = refunds.create(get_db(), g.merchant.id, process.id, amount=form["amount"] or "0",
                                address=form["address"], reason=form["reason"] or None, now=now())
    except refunds.RefundError as e:
        return _refund_form(process, form, errors=e.errors, error="The refund was not created.", status=400)
    except refunds.NotRefundable as e:
        return process_page(process.id, error=str(e), status=409)
    return redirect(url_for("dashboard.refund_page", process_id=process.id, refund_id=refund.id), 303)


def _refund_or_404(process, refund_id):
    for refund in refunds.list_for_process(get_db(), g.merchant.id, process.id):
        if refund.id == refund_id:
            return refund
    raise not_found()


@bp.get("/processes/<process_id>/refunds/<refund_id>")
@login_required
def refund_page(process_id, refund_id, notice=None, error=None, tx_hash="", status=200):
    refund = _refund_or_404(_process_or_404(process_id), refund_id)
    notice = notice or _notice()
    uri = loads(refund_json(refund).encode())["paymentUri"]  # EIP-681, as the API shows it
    return render_template("dashboard/refund.html", refund=refund, amount=_units(refund), notice=notice,
                           network_name=_names()[1].get(refund.network_id, refund.network_id),
                           error=error, tx_hash=tx_hash,
                           symbol=_symbol(refund.asset_id, refund.network_id), payment_uri=uri,
                           transfer_data=transfer_calldata(refund.address, refund.amount)), status


@bp.post("/processes/<process_id>/refunds/<refund_id>/transaction")
@login_required
@owner_required
def name_refund_transaction(process_id, refund_id):
    """The transaction that paid the refund, pasted by hand or sent by the browser wallet."""
    process = _process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    tx_hash = (request.form.get("tx_hash") or "").strip()
    try:
        refunds.name_transaction(get_db(), g.merchant.id, process.id, refund.id, tx_hash, now())
    except refunds.RefundError as e:
        return refund_page(process.id, refund.id, error=" ".join(e.errors["txHash"]),
                           tx_hash=tx_hash, status=400)
    except refunds.NotRefundable as e:
        return refund_page(process.id, refund.id, error=str(e), tx_hash=tx_hash, status=409)
    return _done("dashboard.refund_page", "named", process_id=process.id, refund_id=refund.id)


@bp.get("/processes/<process_id>/refunds/<refund_id>/cancel")
@login_required
@owner_required
def confirm_cancel_refund(process_id, refund_id):
    process = _process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    back = url_for("dashboard.refund_page", process_id=process.id, refund_id=refund.id)
    if refund.status != "pending":
        return redirect(back, 303)
    return _confirm(f"Cancel refund {refund.id}?",
                    f"It will no longer wait for your payment of {_units(refund)}"
                    f" {_symbol(refund.asset_id, refund.network_id)}; a refund.cancelled event is sent."
                    " Do not pay it after cancelling.",
                    url_for("dashboard.cancel_refund", process_id=process.id, refund_id=refund.id),
                    "Cancel refund", back)


@bp.post("/processes/<process_id>/refunds/<refund_id>/cancel")
@login_required
@owner_required
def cancel_refund(process_id, refund_id):
    process = _process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    try:
        refunds.cancel(get_db(), g.merchant.id, process.id, refund.id, now())
    except refunds.NotRefundable as e:
        return process_page(process.id, error=str(e), status=409)
    return _done("dashboard.process_page", "refund-cancelled", process_id=process.id)


# --- Keys ------------------------------------------------------------------------------------------

@bp.get("/keys")
@login_required
def keys_page(new_secret=None, error=None, status=200):
    current = now()
    secret_keys = merchants.keys_of(get_db(), g.merchant.id)
    states = {}
    for k in secret_keys:
        state = k.state(current)
        states[k.id] = {"expiring": f"works until {_when(k.expires_at)}", "expired": f"expired {_when(k.expires_at)}",
                        "revoked": f"revoked {_when(k.revoked_at)}"}.get(state, state)
    if len(g.merchant.signing_secrets(current)) > 1:
        secret_state = ("Deliveries are signed with the current secret and, until"
                        f" {_when(g.merchant.previous_webhook_secret_until)}, with the previous one too.")
    else:
        secret_state = "One secret signs every delivery. It is shown once, when it is made."
    working = [k for k in secret_keys if k.state(current) in ("active", "expiring")]
    revocable = {k.id for k in working} if len(working) > 1 else set()
    return render_template("dashboard/keys.html", secret_keys=secret_keys, key_states=states,
                           webhook_secret_state=secret_state, new_secret=new_secret,
                           overlap_hours=current_app.config["KEY_ROLL_OVERLAP_HOURS"],
                           revocable=revocable, notice=_notice(), error=error), status


def _until(overlap):
    return "stop working now" if not overlap else f"keep working until {_when(now() + overlap)}"


@bp.get("/keys/roll")
@login_required
@owner_required
def confirm_roll_secret_key():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    return _confirm("Roll the secret key?",
                    f"A new secret key is made and shown once. The current keys {_until(overlap)}:"
                    " put the new one on your server before then.",
                    url_for("dashboard.roll_secret_key"), "Roll secret key", url_for("dashboard.keys_page"),
                    danger=False)


@bp.get("/keys/roll-webhook-secret")
@login_required
@owner_required
def confirm_roll_webhook_secret():
    hours = current_app.config["KEY_ROLL_OVERLAP_HOURS"]
    return _confirm("Roll the webhook signing secret?",
                    "A new secret is made and shown once. Deliveries are signed with the previous one"
                    + (f" too for {hours} hour(s)" if hours else " no longer") + ": update your receiver.",
                    url_for("dashboard.roll_webhook_secret"), "Roll webhook secret",
                    url_for("dashboard.keys_page"), danger=False)


def _key_or_404(key_id):
    key = next((k for k in merchants.keys_of(get_db(), g.merchant.id) if k.id == key_id), None)
    if key is None:
        raise not_found()
    return key


@bp.get("/keys/<int:key_id>/revoke")
@login_required
@owner_required
def confirm_revoke_key(key_id):
    key = _key_or_404(key_id)
    return _confirm(f"Revoke key {key.key_prefix}… now?",
                    "It stops working at once: every request your servers still send with it answers"
                    " 401. Do this when the key leaked; a server that still uses it breaks.",
                    url_for("dashboard.revoke_key", key_id=key.id), "Revoke now", url_for("dashboard.keys_page"))


@bp.post("/keys/<int:key_id>/revoke")
@login_required
@owner_required
def revoke_key(key_id):
    key = _key_or_404(key_id)
    try:
        merchants.revoke_key_now(get_db(), g.merchant.id, key.id, now())
    except merchants.MerchantError as e:
        return keys_page(error=str(e), status=409)
    return _done("dashboard.keys_page", "revoked")


@bp.post("/keys/roll")
@login_required
@owner_required
def roll_secret_key():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    secret = merchants.roll_key(get_db(), g.merchant.id, now(), overlap)
    return keys_page(new_secret={
        "title": "New secret key", "value": secret,
        "note": f"Copy it to your server now: it is shown this once. The previous keys {_until(overlap)}."})


@bp.post("/keys/roll-webhook-secret")
@login_required
@owner_required
def roll_webhook_secret():
    overlap = merchants.roll_overlap_seconds(current_app.config)
    secret = merchants.rotate_webhook_secret(get_db(), g.merchant.id, now(), overlap)
    g.merchant = merchant_rows.get(get_db().connection(), g.merchant.id)
    until = f"until {_when(now() + overlap)}" if overlap else "no longer"
    return keys_page(new_secret={
        "title": "New webhook signing secret", "value": secret,
        "note": f"Put it in your webhook receiver now: it is shown this once. Deliveries carry a signature"
                f" with the previous secret too {until}."})


# --- Payouts ---------------------------------------------------------------------------------------

GAS_COIN_DECIMALS = 18  # every EVM chain's gas coin (ETH, POL, ...)


def _client(network):
    return rpc.Client.from_config(network.rpc_url, current_app.config)  # CHAIN_RPC_* timeouts


def _network_payouts(network, assets, payout):
    """What waits on one network for this merchant and what its payout address holds there, its
    browser-wallet collections settled on the way: a dict for the template."""
    found = {"id": network.id, "name": network.name, "chain_id": network.chain_id, "error": None,
             "waiting": [], "addresses": 0, "balance": []}
    try:
        client = _client(network)
        try:
            wallet_payouts.settle(get_db(), network, g.merchant.id, client, now())
        except rpc.RpcError as e:  # not proven yet (the watcher behind): settled on a later visit
            current_app.logger.info("payouts page: collections on %s not settled now: %s", network.id, e)
        found["balance"] = wallet_payouts.balances(client, payout, assets)
        held = collect.waiting(get_db(), network.id, g.merchant.id, client_factory=lambda url: client)
    except rpc.RpcError:
        found["error"] = "The network's node does not answer now, so what waits cannot be read: try again later."
        return found
    for asset in assets:
        if held.totals.get(asset.contract):
            found["waiting"].append((format_units(held.totals[asset.contract], asset.decimals), asset.symbol))
    if held.totals.get(payout_rows.GAS_COIN):
        found["waiting"].append((format_units(held.totals[payout_rows.GAS_COIN], GAS_COIN_DECIMALS),
                                 "of the network's gas coin"))
    found.update(factory=held.factory, addresses=len(held.deposits), calldata=held.calldata,
                 batch=held.batch, capped=held.batch < len(held.deposits))
    return found


def _collections(conn, networks):
    """The merchant's collections, newest first, each with what it moved of the merchant's."""
    symbols = {(a.network_id, a.contract.lower()): a for a in payment_rows.list_assets(conn)}
    rows = payout_rows.of_merchant(conn, g.merchant.id)
    items = payout_rows.items_of(conn, [c.id for c in rows])
    found = []
    for c in rows:
        moved = {}
        for i in items.get(c.id, ()):
            if i.merchant_id == g.merchant.id:
                moved[i.token] = moved.get(i.token, 0) + i.amount
        amounts = []
        for token, amount in sorted(moved.items()):
            asset = symbols.get((c.network_id, token.lower()))
            if asset is not None:
                amounts.append(f"{format_units(amount, asset.decimals)} {asset.symbol}")
            elif token == payout_rows.GAS_COIN:
                amounts.append(f"{format_units(amount, GAS_COIN_DECIMALS)} of the gas coin")
            else:
                amounts.append(f"{amount} units of {token}")
        found.append({"c": c, "network": networks.get(c.network_id, c.network_id), "amounts": amounts,
                      "by": "your browser wallet" if c.recorded_by else "the operator (collect)"})
    return found


@bp.get("/payouts")
@login_required
def payouts_page(notice=None, error=None, status=200):
    notice = notice or _notice()
    conn = get_db().connection()
    payout = payout_rows.get_payout(conn, g.merchant.id)
    with_factory = payout_rows.networks_with_factory(conn)
    assets = payment_rows.list_assets(conn)
    all_networks = payment_rows.list_networks(conn)
    networks = [
        _network_payouts(n, [a for a in assets if a.network_id == n.id], payout)
        for n in all_networks
        if n.id in with_factory and n.disabled_at is None and n.is_test != g.merchant.livemode
    ] if payout else []
    return render_template("dashboard/payouts.html", payout=payout, networks=networks,
                           has_xpub=payment_rows.get_wallet(conn, g.merchant.id) is not None,
                           tolerance=merchants.tolerance_of(get_db(), g.merchant.id),
                           collections=_collections(conn, {n.id: n.name for n in all_networks}),
                           notice=notice, error=error), status


@bp.post("/payouts/<network_id>/collections")
@login_required
@owner_required
def record_collection(network_id):
    """A collection the browser wallet sent (the page posts the hash its wallet answered)."""
    network = next((n for n in payment_rows.list_networks(get_db().connection()) if n.id == network_id), None)
    if network is None or payout_rows.get_factory(get_db().connection(), network_id) is None:
        raise not_found()
    try:
        wallet_payouts.record(get_db(), network, g.merchant.id, (request.form.get("tx_hash") or "").strip(),
                              _client(network), now())
    except wallet_payouts.Refused as e:
        return payouts_page(error=str(e), status=400)
    except rpc.RpcError:
        return payouts_page(error="The network's node does not answer now: the collection is not recorded."
                            " Try again later.", status=503)
    return _done("dashboard.payouts_page", "collection", _anchor="collections")


@bp.post("/settings/tolerance")
@login_required
@owner_required
def set_tolerance():
    """The underpayment tolerance (merchants set-tolerance): a form on the payouts page."""
    try:
        merchants.set_tolerance(get_db(), g.merchant.id, request.form.get("tolerance", ""))
    except merchants.MerchantError as e:
        return payouts_page(error=str(e), status=400)
    return _done("dashboard.payouts_page", "tolerance", _anchor="tolerance")


# --- Webhooks --------------------------------------------------------------------------------------

@bp.get("/webhooks")
@login_required
def webhooks_page(notice=None, error=None, status=200):
    notice = notice or _notice()
    failing = outbox.failing(get_db(), g.merchant.id)
    tests = outbox.tests_of(get_db(), g.merchant.id)
    refresh = _refresh(url_for("dashboard.webhooks_page"), [event for event, _ in tests], now())
    chosen = {name: request.args.get(name, "").strip() for name in ("type", "state")}
    types = (*outbox.EVENT_TYPES, outbox.TEST_EVENT_TYPE)
    if chosen["type"] not in ("", *types) or chosen["state"] not in ("", *event_rows.STATES):
        raise PageError(400, "No such filter", "Choose an event type and a delivery state from the lists.")
    events, more = outbox.page_of(get_db(), g.merchant.id, type=chosen["type"] or None,
                                  state=chosen["state"] or None, before=request.args.get("before"))
    query = {k: v for k, v in chosen.items() if v}
    older = (url_for("dashboard.webhooks_page", **query, before=events[-1][0].id, _anchor="events")
             if more else None)
    return render_template("dashboard/webhooks.html", failing=failing, webhook_url=g.merchant.webhook_url,
                           notice=notice, error=error, tests=tests, refresh=refresh, events=events,
                           chosen=chosen, types=types, states=event_rows.STATES, older=older), status


@bp.post("/webhooks/url")
@login_required
@owner_required
def set_webhook_url():
    url = request.form.get("url", "").strip()
    try:
        _, warning = merchants.set_webhook_url(
            get_db(), g.merchant.id, url or None,
            allow_loopback=current_app.config["WEBHOOK_ALLOW_LOOPBACK"])
    except merchants.MerchantError as e:
        return webhooks_page(error=str(e), status=400)
    return _done("dashboard.webhooks_page", "url-set" if url else "url-removed",
                 **({"warning": warning} if warning else {}))


@bp.post("/webhooks/test")
@login_required
@owner_required
def send_test_event():
    """Queued for the delivery worker, never sent from here: no page waits on an endpoint."""
    if not g.merchant.webhook_url:
        return webhooks_page(error="No webhook URL is set: set one first.", status=409)
    try:
        outbox.queue_test(get_db(), g.merchant, now())
    except outbox.TestEventWaiting as e:
        return webhooks_page(error=str(e), status=409)
    return _done("dashboard.webhooks_page", "test")


@bp.post("/webhooks/replay-failed")
@login_required
@owner_required
def replay_failed():
    replayed = outbox.replay_where(get_db(), now(), statuses=["failed"], merchant_id=g.merchant.id)
    return _done("dashboard.webhooks_page", "replayed", count=len(replayed))


@bp.get("/qr.js")
def qr_js():
    return send_file(io.BytesIO(QR_SCRIPT.body), mimetype="text/javascript", download_name="qr.js",
                     max_age=300, etag=QR_SCRIPT.etag, last_modified=QR_SCRIPT.last_modified)


@bp.get("/<path:anything>")
def unknown(anything):
    raise not_found()
