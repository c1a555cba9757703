"""One process's page and what staff do there: its timeline, payment, unexpected transfers
(templates/dashboard/_unexpected.html), events with their attempts; cancelling it, resending an
event, accepting an unexpected transfer as payment (docs/console.md). Its refunds: refunds.py.

  GET  /dashboard/processes/<id>            one process: timeline, payment, events and attempts
  GET, POST /dashboard/processes/<id>/cancel
  POST /dashboard/processes/<id>/events/<eventId>/resend
  POST /dashboard/processes/<id>/unexpected/<txHash>:<logIndex>/accept
"""
from flask import g, redirect, render_template, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import login_required, not_found, owner_required
from app.core import currency
from app.core.jsonutil import dumps_pretty, loads
from app.core.money import format_units
from app.db import get_db
from app.domain import outbox, payments, processes, refunds, setup, unexpected
from app.domain.representation import payment_object


def _timeline(process, view, event_list, current):
    """What happened to a process, oldest first: (time, title, detail, kind)."""
    items = [(process.created_at, "Created",
              f"Amount {currency.display(process.amount, process.currency)}", "created")]
    for t in view.transfers if view is not None else ():
        amount = format_units(t.amount, view.payment.decimals)
        detail = f"{amount} in block {t.block_number}, tx {t.tx_hash}"
        items.append((t.seen_at, "Transfer seen", detail, "transfer"))
        if t.confirmed_at is not None:
            items.append((t.confirmed_at, "Transfer confirmed", detail, "ok"))
    for event, attempts in event_list:
        items.append((event.created_at, f"Event {event.type}",
                      f"delivery {event.status.replace('_', ' ')}", "event"))
        for a in attempts:
            outcome = f"HTTP {a.status_code}" if a.status_code is not None else "no answer"
            detail = f"{outcome} in {a.duration_ms} ms" + (f": {a.error}" if a.error else "")
            items.append((a.attempted_at, f"Delivery attempt of {event.type}", detail,
                          "ok" if a.error is None else "failed"))
    status = process.effective_status(current)
    if status == "expired" and process.status == "pending":
        items.append((process.expires_at, "Expired", "", "final"))
    return sorted(items, key=lambda item: item[0])  # stable: same-second items keep their order


@bp.get("/processes/<process_id>")
@login_required
def process_page(process_id, notice=None, error=None, status=200):
    process = pages.process_or_404(process_id)
    notice = notice or pages.notice()
    db, current = get_db(), now()
    view = payments.view(db, process)
    payment = payment_object(view) if view is not None else None
    event_list = [outbox.get_with_attempts(db, e.id) for e in outbox.for_process(db, process.id)]
    refresh = pages.refresh(url_for("dashboard.process_page", process_id=process.id),
                       [event for event, _ in event_list], current)
    refundable = refunds.refundable(db, g.merchant.id, process.id, current)
    return render_template(
        "dashboard/process.html", process=process, status=process.effective_status(current),
        updated_at=process.effective_updated_at(current), payment=payment,
        symbol=pages.symbol(view.payment.asset_id, view.payment.network_id) if view else "",
        network_name=(pages.names()[1].get(view.payment.network_id, view.payment.network_id)
                      if view else ""),
        refunds=refunds.list_for_process(db, g.merchant.id, process.id),
        can_refund=refundable not in (None, "0"),
        metadata=dumps_pretty(loads(process.metadata.encode())), event_list=event_list,
        timeline=_timeline(process, view, event_list, current), notice=notice, error=error,
        refresh=refresh, unexpected=_unexpected_rows(payment), quote=_quote(payment),
    ), status


def _quote(payment):
    """The payment's locked quote (representation.quote_object) as the page shows it: the process's
    amount in its currency, and unless it is at par, the rate as "1 EUR = 1.0842 USD", where it
    came from (a price feed: its network, contract and round; or a manual rate) and its times."""
    if not payment:
        return None
    q = payment["quote"]
    found = {"amount": currency.display(q["amount"], q["currency"]), "source": q["source"],
             "quoted_at": pages.iso_when(q.get("quotedAt")), "rate": None}
    if q["source"] != "par" and q.get("pair"):
        base, _, quote_code = q["pair"].partition("/")
        found.update(rate=f"1 {base} = {q['rate']} {quote_code}", round=q.get("roundId"),
                     feed=q.get("feed"), updated_at=pages.iso_when(q.get("rateUpdatedAt")),
                     network=pages.names()[1].get(q.get("networkId"), q.get("networkId")))
    return found


# --- Unexpected transfers (templates/dashboard/_unexpected.html) ----------------------------------


def _unexpected_rows(payment):
    """The payment's unexpected transfers as the partial shows them: each with its network's name
    and whether its token is a registered asset there (only those can be accepted as payment)."""
    if not payment or not payment["unexpectedTransfers"]:
        return []
    names = {n.id: n.name for n in setup.list_networks(get_db())}
    rows = []
    for u in payment["unexpectedTransfers"]:
        registered = setup.asset_with_contract(get_db(), u["networkId"], u["tokenContract"])
        rows.append(dict(u, network_name=names.get(u["networkId"], u["networkId"]),
                         registered=registered is not None))
    return rows


@bp.post("/processes/<process_id>/unexpected/<transfer>/accept")
@login_required
@owner_required
def accept_unexpected(process_id, transfer):
    """Accept an unexpected transfer of a registered asset as payment (app/domain/unexpected.py).
    A key with a character outside ASCII is the 400 page (pages.ascii_value), an unknown one 404."""
    process = pages.process_or_404(process_id)
    pages.ascii_value(transfer, "transfer")
    try:
        unexpected.accept(get_db(), g.merchant.id, process.id, transfer, f"console {g.user.email}",
                          now())
    except unexpected.TransferNotFound:
        raise not_found() from None
    except processes.InvalidState as e:
        return process_page(process.id, error=str(e), status=409)
    return pages.done("dashboard.process_page", "accepted", process_id=process.id,
                      _anchor="unexpected")


@bp.get("/processes/<process_id>/cancel")
@login_required
@owner_required
def confirm_cancel_process(process_id):
    process = pages.process_or_404(process_id)
    back = url_for("dashboard.process_page", process_id=process.id)
    if process.effective_status(now()) != "pending":
        return redirect(back, 303)
    return pages.confirm(f"Cancel process {process.id}?",
                    "The customer can no longer pay its"
                    f" {currency.display(process.amount, process.currency)}; a process.cancelled"
                    " event is sent to your webhook. A cancelled process cannot be reopened.",
                    url_for("dashboard.cancel_process", process_id=process.id), "Cancel", back)


@bp.post("/processes/<process_id>/cancel")
@login_required
@owner_required
def cancel_process(process_id):
    process = pages.process_or_404(process_id)
    try:
        processes.cancel(get_db(), process.id, now(), merchant_id=g.merchant.id)
    except processes.InvalidState as e:
        return process_page(process.id, error=str(e), status=409)
    return pages.done("dashboard.process_page", "cancelled", process_id=process.id)


@bp.post("/processes/<process_id>/events/<event_id>/resend")
@login_required
@owner_required
def resend_event(process_id, event_id):
    process = pages.process_or_404(process_id)
    if event_id not in {e.id for e in outbox.for_process(get_db(), process.id)}:
        raise not_found()
    try:
        outbox.replay(get_db(), event_id, now())
    except outbox.NotReplayed as e:
        return process_page(process.id, error=str(e), status=409)
    return pages.done("dashboard.process_page", "resent", process_id=process.id, _anchor=event_id)
