"""The demo shop's pages: a merchant's site built into the service (registered with DEMO_SHOP on).

  GET  /               the shop: an amount and an order reference
  POST /               its server side: creates the preorder with the demo merchant's SECRET key
                       through the service layer (the same validation as the API), then renders the
                       payment button with the PUBLIC key; the secret key never reaches the browser.
                       "Pay on a hosted page" (hosted=1): the preorder gets a description and the
                       shop's success and cancel URLs, and the customer is sent (303) to its
                       checkout page (app/web/checkout.py)
  GET  /demo/thanks    the shop's success page: ?processId= read back with the SECRET key (the
                       shop trusts its server's answer, not the address)
  POST /demo/webhooks  the demo merchant's webhook endpoint: verifies each Standard Webhooks
                       signature with its webhook secret and keeps the delivery (inbox.py, in
                       memory)
  GET  /demo/webhooks  what arrived, newest first

With DEMO_WALLET_RPC_URL set (a local Hardhat node: `make demo-onchain`), the shop also has a test
wallet: its endpoints are wallet_routes.py's, on this blueprint.

The demo merchant's keys come from DEMO_MERCHANT_FILE, written by `flask --app app demo-merchant`.
"""
from flask import Blueprint, current_app, redirect, render_template, request, url_for

from app.clock import now
from app.core.jsonutil import InvalidJSON, JSONNumber, dumps_pretty, loads
from app.db import get_db
from app.demo.merchant import read_keys
from app.domain import merchants, processes
from app.domain.representation import iso
from app.web.auth import merchant_for_secret_key
from app.web.errors import ApiError, validation_error
from app.web.http import load, parse_process_id, public_base_url
from app.webhooks.signing import VerificationError, verify

bp = Blueprint("demo", __name__, template_folder="templates")

NOT_SET_UP = ("The demo merchant is not set up: run `flask --app app demo-merchant` (make run"
              " does), then reload this page.")
REVOKED = ("The demo merchant's secret key in {path} no longer works: it was revoked (or rolled,"
           " and its overlap is over) in the console. Give the shop the new one: run `flask"
           " --app app demo-merchant --secret-key sk_test_…` with the key the console's Keys page"
           " showed when you rolled it (lost it? roll again there), then reload this page.")
AMOUNT_FORMAT = "Enter the amount as a number, e.g. 19.99."
DEFAULT_AMOUNT = "19.99"
FIELD_NAMES = {"amount": "amount", "order_ref": "order reference"}


def demo_keys():
    """The demo merchant's keys (DEMO_MERCHANT_FILE), None before `demo-merchant` wrote them."""
    return read_keys(current_app.config["DEMO_MERCHANT_FILE"])


# The shop sells in dollars and in euros: a euro order paid in a dollar token shows a quote.
CURRENCIES = (("USD", "US dollar"), ("EUR", "Euro"))


def _shop(status=200, **context):
    context.setdefault("currencies", CURRENCIES)
    context.setdefault("webhooks_url", url_for("demo.webhooks"))
    context.setdefault("button_js_url", url_for("button_api.button_js"))
    context.setdefault("test_wallet", bool(current_app.config.get("DEMO_WALLET_RPC_URL")))
    # A new form holds real values, so sending it at once places an order (placeholders that look
    # like values sent an empty form): a price, and an order reference from the clock.
    context.setdefault("default_amount", DEFAULT_AMOUNT)
    context.setdefault("default_order_ref", f"A-{int(now()) % 100_000:05d}")
    keys = demo_keys()
    if keys and keys.get("paymentLinkId"):  # `demo-merchant` made one: the shop shows it
        context.setdefault("payment_link",
                           url_for("checkout.link_page", link_id=keys["paymentLinkId"]))
    return render_template("demo/shop.html", **context), status


def _unusable(keys):
    """Why the shop cannot use these keys (its merchant gone, its secret key revoked), or None."""
    if keys is None:
        return NOT_SET_UP
    if merchants.by_secret_key(get_db(), keys["secretKey"], now()) is not None:
        return None
    if merchants.get(get_db(), keys["merchantId"]) is not None:
        return REVOKED.format(path=current_app.config["DEMO_MERCHANT_FILE"])
    return f"Invalid secret key. {NOT_SET_UP}"


@bp.get("/")
def shop():
    error = _unusable(demo_keys())
    return _shop(503, error=error) if error else _shop()


@bp.post("/")
def checkout():
    amount_text = request.form.get("amount", "").strip()
    order_ref = request.form.get("order_ref", "").strip()
    code = request.form.get("currency", "USD")
    code = code if code in dict(CURRENCIES) else "USD"
    form = {"amount": amount_text, "order_ref": order_ref, "currency": code}
    hosted = request.form.get("hosted") == "1"  # the "Pay on a hosted page" button
    keys = demo_keys()
    if keys is None:
        return _shop(503, error=NOT_SET_UP, **form)
    try:
        merchant = merchant_for_secret_key(keys["secretKey"])
        fields = _preorder_fields(amount_text, order_ref, hosted=hosted)
        body, _ = processes.create_preorder(
            get_db(), merchant, amount=fields["amount"], metadata=fields["metadata"], now=now(),
            ttl=current_app.config["PROCESS_TTL_SECONDS"], currency=code,
            description=fields.get("description"), success_url=fields.get("successUrl"),
            cancel_url=fields.get("cancelUrl"), checkout_base=public_base_url(),
        )
    except processes.InvalidAmount as e:  # more places than the currency has
        return _shop(400, error="The preorder was not created: check the amount.", errors=e.errors,
                     **form)
    except ApiError as e:  # a validation error, or keys the database no longer knows
        if e.status != 400:
            return _shop(503, error=_unusable(keys) or f"{e.message} {NOT_SET_UP}", **form)
        fields = " and the ".join(FIELD_NAMES.get(field, field) for field in e.errors)
        return _shop(400, error=f"The preorder was not created: check the {fields}.",
                     errors=e.errors, **form)
    process = loads(body.encode("utf-8"))
    if hosted:  # as a shop without a frontend of its own: the customer goes to the checkout page
        return redirect(url_for("checkout.checkout_page", process_id=process["processId"]), 303)
    return _shop(process_id=process["processId"], public_key=merchant.public_key,
                 amount=fields["amount"], order_ref=order_ref, currency=code)


def _preorder_fields(amount_text, order_ref, hosted=False):
    """The form through the API's own PreorderSchema: the amount text must be a JSON number literal
    (so `19.99` stays exact and `1e400`, `NaN`, `"5"` are refused as the API refuses them); the
    order reference goes into the metadata (and, `hosted`, into the description the checkout page
    shows, with the shop's success and cancel URLs). Errors are keyed by form field (amount,
    order_ref)."""
    try:
        amount = loads(amount_text.encode("utf-8")) if amount_text else None
    except InvalidJSON:
        amount = None
    if not isinstance(amount, JSONNumber):
        raise ApiError(400, "validation_error", f"amount: {AMOUNT_FORMAT}",
                       errors={"amount": [AMOUNT_FORMAT]})
    data = {"amount": amount, "metadata": {"orderRef": order_ref} if order_ref else {}}
    if hosted:
        data.update(description=f"Demo shop order {order_ref}".strip(),
                    successUrl=url_for("demo.thanks", _external=True),
                    cancelUrl=url_for("demo.shop", _external=True))
    try:
        return load(current_app.extensions["preorder_schema"], data)
    except ApiError as e:
        raise validation_error(
            {"order_ref" if field in ("metadata", "description") else field: msgs
             for field, msgs in e.errors.items()}
        ) from None


@bp.get("/demo/thanks")
def thanks():
    """The shop's success page: the checkout page sends the customer here with ?processId=; the
    shop reads the process back with its secret key (an address proves nothing) and says so."""
    keys = demo_keys()
    process_id = parse_process_id(request.args.get("processId", ""))
    process = None
    if keys is not None and process_id is not None:
        try:
            merchant = merchant_for_secret_key(keys["secretKey"])
            process = processes.get(get_db(), merchant.id, process_id)
        except (ApiError, processes.ProcessNotFound):
            process = None
    status = process.effective_status(now()) if process else None
    order_ref = loads(process.metadata.encode("utf-8")).get("orderRef") if process else None
    return render_template("demo/thanks.html", process=process, status=status, order_ref=order_ref,
                           shop_url=url_for("demo.shop"), webhooks_url=url_for("demo.webhooks")), \
        200 if process else 404


@bp.post("/demo/webhooks")
def receive_webhook():
    body = request.get_data(cache=False)
    keys = demo_keys()
    try:
        if keys is None:
            raise VerificationError("the demo merchant is not set up")
        verify(keys["webhookSecret"], request.headers, body, now=now())
        verified, reason = True, None
    except VerificationError as e:
        verified, reason = False, str(e)
    try:
        payload = loads(body)
        pretty = dumps_pretty(payload)
        event_type = payload.get("type") if isinstance(payload, dict) else None
    except (InvalidJSON, RecursionError):
        pretty, event_type = body.decode("utf-8", "replace"), None
    current_app.extensions["demo_webhook_inbox"].add(
        received_at=iso(now()), webhook_id=request.headers.get("webhook-id", ""),
        type=event_type if isinstance(event_type, str) else "(no type)",
        verified=verified, reason=reason, body_pretty=pretty,
    )
    if not verified:
        raise ApiError(400, "invalid_signature", f"The webhook signature did not verify: {reason}.")
    return "", 204


@bp.get("/demo/webhooks")
def webhooks():
    return render_template("demo/webhooks.html", shop_url=url_for("demo.shop"),
                           deliveries=current_app.extensions["demo_webhook_inbox"].deliveries())
