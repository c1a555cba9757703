"""A process's refunds: the form (what may still be refunded, to the address that paid), the
refund's page (its EIP-681 QR code, the browser wallet's button, the transaction that paid it, who
sent it and who named it, a name the watcher cleared and why) and cancelling it (docs/console.md
"Refunds"; the rules are app/domain/refunds.py's).

  GET, POST /dashboard/processes/<id>/refund
  GET  /dashboard/processes/<id>/refunds/<refundId>, POST .../transaction (the hash that paid it)
  GET, POST /dashboard/processes/<id>/refunds/<refundId>/cancel
"""
from flask import g, redirect, render_template, request, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.process import process_page
from app.console.security import login_required, not_found, owner_required
from app.db import get_db
from app.domain import payments, refunds
from app.domain.representation import refund_payment_uri
from app.evm.logs import transfer_calldata
from app.web import qr


def _refund_form(process, form, errors=None, error=None, status=200):
    view = payments.view(get_db(), process)
    remaining = refunds.refundable(get_db(), g.merchant.id, process.id, now())
    if view is None or remaining is None:
        return process_page(process.id, error="This process has no confirmed payment to refund.",
                            status=409)
    payers = {t.from_address for t in view.transfers if t.status == "confirmed"}
    payer = payers.pop() if len(payers) == 1 else None
    # a new form: what may still be refunded, to the address that paid when only one did
    if not form:
        form = {"amount": remaining, "address": payer or "", "reason": ""}
    return render_template("dashboard/refund_new.html", process=process, form=form,
                           errors=errors or {}, error=error, remaining=remaining, payer=payer,
                           network=pages.names()[1].get(view.payment.network_id,
                                                        view.payment.network_id),
                           symbol=pages.symbol(view.payment.asset_id,
                                               view.payment.network_id)), status


@bp.get("/processes/<process_id>/refund")
@login_required
@owner_required
def refund_form(process_id):
    return _refund_form(pages.process_or_404(process_id), None)


@bp.post("/processes/<process_id>/refund")
@login_required
@owner_required
def create_refund(process_id):
    process = pages.process_or_404(process_id)
    form = {name: request.form.get(name, "").strip() for name in ("amount", "address", "reason")}
    try:
        refund = refunds.create(get_db(), g.merchant.id, process.id, amount=form["amount"] or "0",
                                address=form["address"], reason=form["reason"] or None, now=now())
    except refunds.RefundError as e:
        return _refund_form(process, form, errors=e.errors, error="The refund was not created.",
                            status=400)
    except refunds.NotRefundable as e:
        return process_page(process.id, error=str(e), status=409)
    return redirect(url_for("dashboard.refund_page", process_id=process.id, refund_id=refund.id),
                    303)


def _refund_or_404(process, refund_id):
    for refund in refunds.list_for_process(get_db(), g.merchant.id, process.id):
        if refund.id == refund_id:
            return refund
    raise not_found()


@bp.get("/processes/<process_id>/refunds/<refund_id>")
@login_required
def refund_page(process_id, refund_id, notice=None, error=None, tx_hash="", status=200):
    refund = _refund_or_404(pages.process_or_404(process_id), refund_id)
    notice = notice or pages.notice()
    uri = refund_payment_uri(refund)  # EIP-681, as the API shows it
    return render_template("dashboard/refund.html", refund=refund, amount=pages.units(refund),
                           notice=notice,
                           network_name=pages.names()[1].get(refund.network_id, refund.network_id),
                           error=error, tx_hash=tx_hash,
                           symbol=pages.symbol(refund.asset_id, refund.network_id),
                           payment_uri=uri, qr_src=qr.svg_data_uri(uri),
                           from_payout=refunds.sent_from_payout(get_db(), refund),
                           transfer_data=transfer_calldata(refund.address, refund.amount)), status


@bp.post("/processes/<process_id>/refunds/<refund_id>/transaction")
@login_required
@owner_required
def name_refund_transaction(process_id, refund_id):
    """The transaction that paid the refund, pasted by hand or sent by the browser wallet."""
    process = pages.process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    tx_hash = (request.form.get("tx_hash") or "").strip()
    try:
        refunds.name_transaction(get_db(), g.merchant.id, process.id, refund.id, tx_hash, now(),
                                 named_by=g.user.email)
    except refunds.RefundError as e:
        return refund_page(process.id, refund.id, error=" ".join(e.errors["txHash"]),
                           tx_hash=tx_hash, status=400)
    except refunds.NotRefundable as e:
        return refund_page(process.id, refund.id, error=str(e), tx_hash=tx_hash, status=409)
    return pages.done("dashboard.refund_page", "named", process_id=process.id, refund_id=refund.id)


@bp.get("/processes/<process_id>/refunds/<refund_id>/cancel")
@login_required
@owner_required
def confirm_cancel_refund(process_id, refund_id):
    process = pages.process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    back = url_for("dashboard.refund_page", process_id=process.id, refund_id=refund.id)
    if refund.status != "pending":
        return redirect(back, 303)
    return pages.confirm(f"Cancel refund {refund.id}?",
                    f"It will no longer wait for your payment of {pages.units(refund)}"
                    f" {pages.symbol(refund.asset_id, refund.network_id)}; a refund.cancelled event"
                    " is sent. Do not pay it after cancelling.",
                    url_for("dashboard.cancel_refund", process_id=process.id, refund_id=refund.id),
                    "Cancel refund", back)


@bp.post("/processes/<process_id>/refunds/<refund_id>/cancel")
@login_required
@owner_required
def cancel_refund(process_id, refund_id):
    process = pages.process_or_404(process_id)
    refund = _refund_or_404(process, refund_id)
    try:
        refunds.cancel(get_db(), g.merchant.id, process.id, refund.id, now())
    except refunds.NotRefundable as e:
        return process_page(process.id, error=str(e), status=409)
    return pages.done("dashboard.process_page", "refund-cancelled", process_id=process.id)
