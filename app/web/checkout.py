"""Pages for customers, served by the service itself (docs/api.md, "Checkout page and link pages"):

  GET  /checkout/<processId>   the hosted checkout page of a process: the merchant's display name,
                               the description, the price and the payment button (the one component,
                               button.js, with the merchant's public key filled in here); a way back
                               to the shop while pending; a receipt once completed, then on to the
                               shop's successUrl with `processId` added to its query
  GET  /l/<linkId>             a payment link's page: what is sold and a "Pay" button; creates
                               nothing
  POST /l/<linkId>             the customer's click: a new pending process of the link
                               (app/domain/links.py open_process), then 303 to its checkout page

No key is needed: a process id (a random UUID) and a link id are the capabilities, as for the
button's public view. Nothing here ever shows a process's or a link's metadata (it can hold
e-mails).
Errors are pages with the same status (404, 405, 410, 429, 503, 500), never the API's JSON.

Headers are the console's (app/web/http.py CSP): a CSP without 'unsafe-inline', no framing, no
referrer (the checkout address is a capability: the shop's page must not read it from Referer),
no caching of a page. The payment button needs nothing more: its modules (script-src 'self') and
its style sheet, a file linked into its shadow root (style-src 'self'), come from this service.
"""
import ipaddress
import logging
import re
from urllib.parse import urlsplit, urlunsplit

from flask import Blueprint, current_app, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from app.clock import now
from app.core import currency
from app.core.money import format_units
from app.db import get_db, is_unavailable
from app.domain import links, merchants, payments, processes, setup
from app.web.http import CSP, client_address, parse_process_id, public_base_url

log = logging.getLogger(__name__)

bp = Blueprint("checkout", __name__, template_folder="templates",
               static_folder="../static/checkout", static_url_path="/checkout/assets")

LINK_ID = re.compile(r"link_[0-9a-f]{24}")
# A completed page sends the customer on to the shop after this many seconds (the contract: within
# 10 s of the payment; the button's success event reloads this page about a second after it).
REDIRECT_SECONDS = 5
RETRY_AFTER_SECONDS = 5  # a database that cannot serve: as app/web/errors.py asks



@bp.after_request
def _headers(response):
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Content-Type-Options"] = "nosniff"
    if request.endpoint != "checkout.static":
        response.headers["Cache-Control"] = "no-store"
    return response


# --- Errors as pages ------------------------------------------------------------------------------

class PageError(HTTPException):
    def __init__(self, code, title, message, headers=None):
        super().__init__(message)
        self.code, self.title, self.message = code, title, message
        self.extra_headers = headers or {}


def _page(code, title, message, headers=None, merchant_name=None):
    body = render_template("checkout/error.html", code=code, title=title, message=message,
                           merchant_name=merchant_name)
    return body, code, headers or {}


def not_found(what="page"):
    return PageError(404, "Not found", f"There is no such {what} here. Check the address you were"
                     " given, or ask the shop for a new one.")


@bp.errorhandler(Exception)
def _error(e):
    if isinstance(e, PageError):
        return _page(e.code, e.title, e.message, e.extra_headers)
    if isinstance(e, HTTPException):
        if e.code == 404:
            return _error(not_found())
        if e.code == 405:
            allowed = ", ".join(e.valid_methods or ())
            return _page(405, "Not allowed", f"This page does not take a {request.method} request.",
                         {"Allow": allowed} if allowed else None)
        return _page(e.code, e.name, e.description or e.name)
    if is_unavailable(get_db(), e):
        log.error("database unavailable on %s %s: %s", request.method, request.path, e)
        return _page(503, "Try again in a moment", "The payment service cannot serve this"
                     " page right now. Nothing was charged: try again in a few seconds.",
                     {"Retry-After": str(RETRY_AFTER_SECONDS)})
    log.exception("unhandled error on %s %s", request.method, request.path)
    return _page(500, "Something went wrong", "An internal error occurred; it has been logged."
                 " Nothing was charged: try again, or go back to the shop.")


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


@bp.route("/checkout", methods=_METHODS, defaults={"rest": ""}, strict_slashes=False)
@bp.route("/checkout/<path:rest>", methods=_METHODS, strict_slashes=False)
def unknown_checkout(rest):
    """Anything else under /checkout/ (a malformed id, a longer path, another method): a page, never
    the API's JSON."""
    if parse_process_id(rest) is not None:
        raise _method_not_allowed(["GET", "HEAD"])
    raise not_found("payment")


@bp.route("/l", methods=_METHODS, defaults={"rest": ""}, strict_slashes=False)
@bp.route("/l/<path:rest>", methods=_METHODS, strict_slashes=False)
def unknown_link(rest):
    if LINK_ID.fullmatch(rest):
        raise _method_not_allowed(["GET", "HEAD", "POST"])
    raise not_found("payment link")


def _method_not_allowed(allowed):
    return PageError(405, "Not allowed", f"This page does not take a {request.method} request.",
                     {"Allow": ", ".join(allowed)})


# --- The checkout page ----------------------------------------------------------------------------

def with_process_id(url, process_id):
    """`url` with `processId=<id>` added to its query (what was there kept as written)."""
    parts = urlsplit(url)
    query = f"{parts.query}&processId={process_id}" if parts.query else f"processId={process_id}"
    return urlunsplit(parts._replace(query=query))


def _receipt(db, process, status):
    """What a completed page shows of the payment: None for another status; else a dict with the
    payment's asset, network, amount paid and transaction hashes (None without a live payment: a
    sandbox payment, or one an operator confirmed by hand)."""
    if status != "completed":
        return None
    view = payments.view(db, process)
    if view is None:
        return {"live": None, "test": not process.livemode}
    pay = view.payment
    asset = setup.asset(db, pay.asset_id, pay.network_id)
    network = setup.network(db, pay.network_id)
    counted = [t for t in view.transfers if t.status == "confirmed"]
    return {"test": not process.livemode, "live": {
        "symbol": asset.symbol if asset else pay.asset_id,
        "network": network.name if network else pay.network_id,
        "paid": format_units(sum(t.amount for t in counted), pay.decimals),
        "tx_hashes": [t.tx_hash for t in counted]}}


@bp.get("/checkout/<process_id:process_id>")
def checkout_page(process_id):
    db = get_db()
    try:
        process = processes.get(db, None, process_id)
    except processes.ProcessNotFound:
        raise not_found("payment") from None
    merchant = merchants.get(db, process.merchant_id)
    current = now()
    status = process.effective_status(current)
    back = None
    if status == "pending":
        if process.cancel_url:
            back = (process.cancel_url, "Back to the shop")
        elif process.link_id:
            back = (url_for("checkout.link_page", link_id=process.link_id), "Back")
    success = with_process_id(process.success_url, process.id) if process.success_url else None
    again = url_for("checkout.link_page", link_id=process.link_id) if process.link_id else None
    refresh = (REDIRECT_SECONDS, success) if status == "completed" and success else None
    return render_template(
        "checkout/process.html", process=process, status=status, merchant=merchant,
        merchant_name=links.display_name(merchant),
        price=currency.display(process.amount, process.currency),
        back=back, success=success, refresh=refresh, again=again,
        receipt=_receipt(db, process, status), selling=not merchant.disabled,
        test=not process.livemode,
        button_js=url_for("button_api.button_js"))


# --- The link's page and its click ----------------------------------------------------------------

UNAVAILABLE = {
    "deactivated": "The seller has turned this payment link off.",
    "expired": "This payment link has expired.",
    "sold out": "This payment link has reached the number of payments it takes.",
}


def _link(link_id):
    if not LINK_ID.fullmatch(link_id):
        raise not_found("payment link")
    try:
        return links.get(get_db(), None, link_id)
    except links.LinkNotFound:
        raise not_found("payment link") from None


def _gone(link, reason, merchant_name):
    message = UNAVAILABLE.get(reason, "The seller no longer takes payments through it.")
    return _page(410, "No longer available", f"{message} Nothing was charged. Ask the seller for a"
                 " new link if you still want to buy.", merchant_name=merchant_name)


@bp.get("/l/<link_id>")
def link_page(link_id):
    """The link's page: creates nothing (a crawler, a chat app's preview, a reload are harmless)."""
    link = _link(link_id)
    db = get_db()
    merchant = merchants.get(db, link.merchant_id)
    name = links.display_name(merchant) if merchant else None
    paid = links.payments(db, [link]).get(link.id, 0)
    reason = link.why_unavailable(paid, now())
    if reason is None and (merchant is None or merchant.disabled):
        reason = "the merchant no longer sells"
    if reason is not None:
        return _gone(link, reason, name)
    return render_template("checkout/link.html", link=link, merchant=merchant, merchant_name=name,
                           price=currency.display(link.amount, link.currency),
                           test=not link.livemode)


# No CSRF token on this form, by design: the POST only creates a pending process (nothing is paid,
# nothing of the customer's is changed) and is rate-limited per client address and link
# (LINK_PROCESSES_PER_MINUTE); a forged click from another site gains its author nothing that
# posting here directly would not, and the link's page needs no session or cookie at all.
@bp.post("/l/<link_id>")
def open_link(link_id):
    link = _link(link_id)
    config = current_app.config
    try:
        process = links.open_process(
            get_db(), link.id, client=_client_network(), now=now(),
            ttl=config["PROCESS_TTL_SECONDS"],
            per_minute=config["LINK_PROCESSES_PER_MINUTE"], checkout_base=public_base_url())
    except links.LinkNotFound:
        raise not_found("payment link") from None
    except links.LinkUnavailable as e:
        merchant = merchants.get(get_db(), link.merchant_id)
        return _gone(link, e.reason, links.display_name(merchant) if merchant else None)
    except links.TooManyProcesses as e:
        return _page(429, "Too many attempts", "This link was used to start many payments from your"
                     f" connection in the last minute. Wait {e.retry_after} seconds, then try"
                     " again.",
                     {"Retry-After": str(e.retry_after)})
    return redirect(url_for("checkout.checkout_page", process_id=process.id), 303)


def _client_network() -> str:
    """Who the link's rate limit counts: the client's address, or for IPv6 its /64 (one host
    holds a whole /64, and would otherwise count as 2^64 clients)."""
    client = client_address()
    try:
        address = ipaddress.ip_address(client)
    except ValueError:  # no address (a unix socket): counted as it is
        return client
    if address.version == 4:
        return client
    return str(ipaddress.ip_network(f"{address}/64", strict=False))
