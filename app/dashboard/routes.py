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

from flask import (Blueprint, Response, current_app, g, redirect, render_template, request, send_file,
                   stream_with_context, url_for)

from app import collect, outbox, merchants, payments, processes, refunds, unexpected
from app.chain import rpc
from app.chain.rpc import transfer_calldata
from app.clock import now
from app.dashboard import accounts, security
from app.dashboard.security import PageError, login_required, not_found, owner_required
from app.data import merchants as merchant_rows
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
               "metadata", "assetId", "networkId", "amountDue", "amountPaid",
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
        return redirect(url_for("dashboard.processes_page"))
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
    response = redirect(url_for("dashboard.processes_page"), 303)
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


def _filters():
    """The list's filters from the query string: (filters for process_rows.list_page, form values,
    error messages). An impossible combination (another mode than the merchant's) gives None."""
    args = request.args
    form = {name: args.get(name, "").strip() for name in ("status", "mode", "from", "to", "q",
                                                          "unexpected")}
    errors, found = [], {}
    if form["unexpected"]:  # the filter "has unexpected transfers"
        found["unexpected"] = True
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
    """(processes, has_more) for the filters, newest first, before the process `before`."""
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
    if found.get("unexpected") and not process_rows.has_unexpected(get_db().connection(), process.id):
        return False
    return (found.get("status") in (None, process.effective_status(now()))
            and process.created_at >= found.get("created_from", process.created_at)
            and process.created_at < found.get("created_before", process.created_at + 1))


def _summary(metadata):
    """A short line of a process's metadata for the list."""
    text = ", ".join(f"{k}: {v}" for k, v in json.loads(metadata).items()
                     if isinstance(v, (str, int, float)) and not isinstance(v, bool))
    text = text.replace("\x00", "\ufffd")  # HTML has no NUL: what a browser would show
    return text if len(text) <= 80 else text[:79] + "…"


@bp.get("/")
@login_required
def processes_page():
    found, form, errors = _filters()
    items, has_more = ([], False) if errors else _page(found, limit=PAGE_SIZE, before=request.args.get("before"))
    query = {k: v for k, v in form.items() if v}
    current = now()
    rows = [{"process": p, "status": p.effective_status(current), "summary": _summary(p.metadata)}
            for p in items]
    next_url = url_for("dashboard.processes_page", **query, before=items[-1].id) if has_more else None
    return render_template("dashboard/processes.html", rows=rows, form=form, errors=errors,
                           statuses=STATUSES, next_url=next_url, first_page=bool(request.args.get("before")),
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
        before = None
        while True:
            batch, more = _page(found, limit=CSV_BATCH, before=before)
            current = now()
            views = payments.views(get_db(), batch)  # what was paid against what was due
            for p in batch:
                writer.writerow((p.id, p.effective_status(current), p.amount, "true" if p.livemode else "false",
                                 iso(p.created_at), iso(p.effective_updated_at(current)), iso(p.expires_at),
                                 p.metadata, *_paid_against_due(views.get(p.id)),
                                 *_chain_proof(views.get(p.id))))
            yield out.getvalue()
            heartbeat()
            out.seek(0)
            out.truncate()
            if not more:
                return
            before = batch[-1].id

    return Response(stream_with_context(rows()), mimetype="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="processes.csv"'})


def _paid_against_due(view):
    """The CSV's payment columns: asset, network, amount due and confirmed amount paid, in token
    units (a payment completed under the merchant's tolerance shows paid below due); empty without."""
    if view is None:
        return ("", "", "", "")
    p = view.payment
    paid = sum(t.amount for t in view.transfers if t.status == "confirmed")
    return (p.asset_id, p.network_id, format_units(p.amount_due, p.decimals), format_units(paid, p.decimals))


def _chain_proof(view):
    """The CSV's chain proof of what `amountPaid` counts: per confirmed transfer (an accepted
    unexpected one included), its transaction hash, log index, block number and block hash, each
    column a space-separated list in the same order; empty without."""
    counted = [t for t in view.transfers if t.status == "confirmed"] if view is not None else []
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
    return process_page(process.id, notice=f"Transfer {transfer} is accepted as payment: it counts"
                        " in the amount paid, and the process's event is queued.")


@bp.post("/processes/<process_id>/cancel")
@login_required
@owner_required
def cancel_process(process_id):
    process = _process_or_404(process_id)
    try:
        processes.cancel(get_db(), process.id, now(), merchant_id=g.merchant.id)
    except processes.InvalidState as e:
        return process_page(process.id, error=str(e), status=409)
    return process_page(process.id, notice="The process is cancelled; its process.cancelled event is queued.")


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
    return process_page(process.id, notice=f"Event {event_id} is queued for delivery again; its"
                        " attempt shows below when the delivery worker has made it.")


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
    return render_template("dashboard/refund_new.html", process=process, form=form, errors=errors or {},
                           error=error, remaining=remaining, network=view.payment.network_id,
                           symbol=_symbol(view.payment.asset_id, view.payment.network_id)), status


@bp.get("/processes/<process_id>/refund")
@login_required
@owner_required
def refund_form(process_id):
    return _refund_form(_process_or_404(process_id), {"amount": "", "address": "", "reason": ""})


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
    uri = loads(refund_json(refund).encode())["paymentUri"]  # EIP-681, as the API shows it
    return render_template("dashboard/refund.html", refund=refund, amount=_units(refund), notice=notice,
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
    return refund_page(process.id, refund.id, notice=f"Transaction {tx_hash.lower()} is named for"
                       " this refund: it completes once that transaction is confirmed.")


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
    return process_page(process.id, notice=f"Refund {refund.id} is cancelled.")


# --- Keys ------------------------------------------------------------------------------------------

@bp.get("/keys")
@login_required
def keys_page(new_secret=None):
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
    return render_template("dashboard/keys.html", secret_keys=secret_keys, key_states=states,
                           webhook_secret_state=secret_state, new_secret=new_secret,
                           overlap_hours=current_app.config["KEY_ROLL_OVERLAP_HOURS"])


def _until(overlap):
    return "stop working now" if not overlap else f"keep working until {_when(now() + overlap)}"


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


def _network_payouts(network, assets):
    """What waits on one network for this merchant: a dict for the template."""
    found = {"id": network.id, "name": network.name, "chain_id": network.chain_id, "error": None,
             "waiting": [], "addresses": 0}
    try:
        held = collect.waiting(get_db(), network.id, g.merchant.id, client_factory=lambda url:
                               rpc.Client.from_config(url, current_app.config))
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


@bp.get("/payouts")
@login_required
def payouts_page(notice=None, error=None, status=200):
    conn = get_db().connection()
    payout = payout_rows.get_payout(conn, g.merchant.id)
    with_factory = payout_rows.networks_with_factory(conn)
    assets = payment_rows.list_assets(conn)
    networks = [
        _network_payouts(n, [a for a in assets if a.network_id == n.id])
        for n in payment_rows.list_networks(conn)
        if n.id in with_factory and n.disabled_at is None and n.is_test != g.merchant.livemode
    ] if payout else []
    return render_template("dashboard/payouts.html", payout=payout, networks=networks,
                           has_xpub=payment_rows.get_wallet(conn, g.merchant.id) is not None,
                           tolerance=merchants.tolerance_of(get_db(), g.merchant.id),
                           notice=notice, error=error), status


@bp.post("/settings/tolerance")
@login_required
@owner_required
def set_tolerance():
    """The underpayment tolerance (merchants set-tolerance): a form on the payouts page."""
    try:
        tolerance = merchants.set_tolerance(get_db(), g.merchant.id, request.form.get("tolerance", ""))
    except merchants.MerchantError as e:
        return payouts_page(error=str(e), status=400)
    return payouts_page(notice=f"Underpayment tolerance set to {tolerance} %: payments confirmed from"
                               " now on complete at the amount due less that.")


# --- Webhooks --------------------------------------------------------------------------------------

@bp.get("/webhooks")
@login_required
def webhooks_page(notice=None, error=None, status=200):
    failing = outbox.failing(get_db(), g.merchant.id)
    tests = outbox.tests_of(get_db(), g.merchant.id)
    refresh = _refresh(url_for("dashboard.webhooks_page"), [event for event, _ in tests], now())
    return render_template("dashboard/webhooks.html", failing=failing, webhook_url=g.merchant.webhook_url,
                           notice=notice, error=error, tests=tests, refresh=refresh), status


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
    g.merchant = merchant_rows.get(get_db().connection(), g.merchant.id)
    note = f" Careful: {warning[0].upper()}{warning[1:]}." if warning else ""
    return webhooks_page(notice=f"Webhook URL {'set to ' + url if url else 'removed'}.{note}")


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
    return webhooks_page(notice="Test event queued: its result shows below when the delivery worker"
                         " has sent it.")


@bp.post("/webhooks/replay-failed")
@login_required
@owner_required
def replay_failed():
    replayed = outbox.replay_where(get_db(), now(), statuses=["failed"], merchant_id=g.merchant.id)
    return webhooks_page(notice=f"{len(replayed)} failed event(s) queued for delivery again.")


@bp.get("/qr.js")
def qr_js():
    return send_file(io.BytesIO(QR_SCRIPT.body), mimetype="text/javascript", download_name="qr.js",
                     max_age=300, etag=QR_SCRIPT.etag, last_modified=QR_SCRIPT.last_modified)


@bp.get("/<path:anything>")
def unknown(anything):
    raise not_found()
