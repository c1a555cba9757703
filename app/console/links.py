"""The Links page: payment links (docs/console.md "Payment links"), and the display name the
customers' pages show (set on the settings page).

  GET  /dashboard/links                          the links, newest first (pages of 20): each one's
                                                 address with a copy button and its QR code (drawn
                                                 here), its state, its payments, its processes
  POST /dashboard/links                          owner: a new link (the API's LinkSchema rules)
  GET  /dashboard/links/<linkId>/deactivate      owner: the confirmation
  POST /dashboard/links/<linkId>/deactivate      owner: deactivate it
"""
from datetime import UTC, datetime

from babel.numbers import get_currency_name
from flask import current_app, g, redirect, render_template, request, url_for
from marshmallow import ValidationError

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import PageError, login_required, not_found, owner_required
from app.core import currency, jsonutil
from app.db import get_db
from app.domain import links, processes
from app.web import qr
from app.web.http import public_base_url
from app.web.schemas import LinkSchema

PAGE_SIZE = 20  # each link's QR code is drawn for the page (a few ms each)

# After a change here (PRG, as pages.done): the notice, by its key in the address.
NOTICES = {
    "created": "Payment link created: share its address or its QR code.",
    "deactivated": "The link is deactivated: it now answers \"no longer available\" and starts no"
                   " payment; payments already started from it may still complete.",
}

# The form's fields and the API's names for them (LinkSchema), for errors shown by their field.
FIELDS = {"amount": "amount", "currency": "currency", "description": "description",
          "maxPayments": "max_payments", "expiresAt": "expires_at", "successUrl": "success_url"}
AMOUNT_FORMAT = "Enter the amount as a number, e.g. 19.99."
WHEN_FORMAT = "Enter a UTC time as YYYY-MM-DDTHH:MM."


def _currencies():
    return [(code, get_currency_name(code, locale="en")) for code in sorted(currency.known())]


def link_url(link) -> str:
    return f"{public_base_url()}/l/{link.id}"


def _rows(found):
    """What the page shows of each link: its address, QR code, state, payments."""
    db, current = get_db(), now()
    paid = links.payments(db, found)
    rows = []
    for link in found:
        count = paid.get(link.id, 0)
        url = link_url(link)
        rows.append({"link": link, "url": url, "qr": qr.svg_data_uri(url), "payments": count,
                     "state": link.why_unavailable(count, current) or "active",
                     "over": link.max_payments is not None and count > link.max_payments,
                     "price": currency.display(link.amount, link.currency)})
    return rows


@bp.get("/links")
@login_required
def links_page(errors=None, form=None, status=200):
    after = pages.ascii_value(request.args.get("after"), "after") or None
    try:
        found, has_more = links.page(get_db(), g.merchant.id, limit=PAGE_SIZE, starting_after=after)
    except links.LinkNotFound:
        raise PageError(400, "No such page", "The page asked for does not exist: start from the"
                        " first page.") from None
    owner = g.user.role == "owner"
    form = form or {"currency": g.merchant.currency}
    return render_template(
        "dashboard/links.html", rows=_rows(found), owner=owner, form=form, errors=errors or {},
        currencies=_currencies() if owner else (), notice=_notice(),
        first_page=bool(after), display_name=links.display_name(g.merchant),
        next_url=url_for("dashboard.links_page", after=found[-1].id) if has_more else None), status


def _notice():
    """The notice of the change this GET follows."""
    return NOTICES.get(request.args.get("done", ""))


def _utc(text):
    """A datetime-local value ("2026-12-24T18:00", seconds optional) read as UTC, in the API's
    form ("2026-12-24T18:00:00Z"); ValueError when it is not one."""
    for layout in ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"):
        try:
            when = datetime.strptime(text, layout)
        except ValueError:
            continue
        return when.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise ValueError(text)


def _body(form):
    """The form as the API's JSON body would be (numbers as JSON number literals), or errors."""
    body, errors = {"description": form["description"], "currency": form["currency"]}, {}
    amount = form["amount"]
    try:
        value = jsonutil.loads(amount.encode("utf-8")) if amount.isascii() and amount else None
    except jsonutil.InvalidJSON:
        value = None
    if isinstance(value, jsonutil.JSONNumber):
        body["amount"] = value
    else:
        errors["amount"] = [AMOUNT_FORMAT]
    if form["max_payments"]:
        text = form["max_payments"]
        body["maxPayments"] = (jsonutil.JSONNumber(text) if text.isascii() and text.isdigit()
                               else text)
    if form["expires_at"]:
        try:
            body["expiresAt"] = _utc(form["expires_at"]) if form["expires_at"].isascii() else None
        except ValueError:
            body["expiresAt"] = None
        if body["expiresAt"] is None:
            del body["expiresAt"]
            errors["expires_at"] = [WHEN_FORMAT]
    if form["success_url"]:
        body["successUrl"] = form["success_url"]
    return body, errors


def _keyed(errors):
    return {FIELDS.get(field, field): messages for field, messages in errors.items()}


@bp.post("/links")
@login_required
@owner_required
def create_link():
    form = {name: (request.form.get(name) or "").strip()
            for name in ("amount", "currency", "description", "max_payments", "expires_at",
                         "success_url")}
    body, errors = _body(form)
    schema = LinkSchema(current_app.extensions["preorder_schema"].limits)
    try:
        fields = schema.load(body)
    except ValidationError as e:
        for field, messages in _keyed(e.messages).items():
            errors.setdefault(field, messages)  # the form's own reading first (the amount's)
    if errors:
        return links_page(errors=errors, form=form, status=400)
    try:
        link = links.create(get_db(), g.merchant, amount=fields["amount"],
                            description=fields["description"], now=now(),
                            currency=fields.get("currency"), success_url=fields.get("successUrl"),
                            max_payments=fields.get("maxPayments"),
                            expires_at=fields.get("expiresAt"))
    except (links.LinkError, processes.InvalidAmount, processes.InvalidUrl) as e:
        return links_page(errors=_keyed(e.errors), form=form, status=400)
    return redirect(url_for("dashboard.links_page", done="created", _anchor=f"link-{link.id}"), 303)


def _own_link(link_id):
    link_id = pages.ascii_value(link_id, "linkId")
    try:
        return links.get(get_db(), g.merchant.id, link_id)
    except links.LinkNotFound:
        raise not_found() from None


@bp.get("/links/<link_id>/deactivate")
@login_required
@owner_required
def confirm_deactivate_link(link_id):
    link = _own_link(link_id)
    back = url_for("dashboard.links_page", _anchor=f"link-{link.id}")
    if link.deactivated_at is not None:
        return redirect(back, 303)
    return pages.confirm(
        "Deactivate this payment link?",
        f"\"{link.description}\" ({currency.display(link.amount, link.currency)}) will answer"
        " \"no longer available\" to anyone who opens it, and start no payment; payments already"
        " started from it may still complete. A deactivated link cannot be turned on again: create"
        " a new one.",
        url_for("dashboard.deactivate_link", link_id=link.id), "Deactivate", back)


@bp.post("/links/<link_id>/deactivate")
@login_required
@owner_required
def deactivate_link(link_id):
    link = _own_link(link_id)
    links.deactivate(get_db(), g.merchant.id, link.id, now())
    return redirect(url_for("dashboard.links_page", done="deactivated",
                            _anchor=f"link-{link.id}"), 303)
