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
  POST /demo/webhooks  the demo merchant's webhook endpoint: verifies each Standard Webhooks signature
                       with its webhook secret and keeps the delivery (inbox.py, in memory)
  GET  /demo/webhooks  what arrived, newest first

With DEMO_WALLET_RPC_URL set (a local Hardhat node: `make demo-onchain`), the shop also has a test
wallet (wallet.py) for the on-chain payment of the order on the page:
  GET  /demo/wallet/<processId>       the dev account, its balance of the payment's token, the head
  POST /demo/wallet/<processId>/send  {"kind": "full" | "partial" | "over"}: a token transfer to the
                                      payment's address of what is outstanding, half of it, or
                                      one token more
  POST /demo/wallet/<processId>/refunds/<refundId>  pays a pending refund of the order: from the
                                      merchant's payout wallet when the node signs for it (the
                                      watcher then finds it by itself), else from the order's deposit
                                      address (the merchant's: the node impersonates it), the
                                      transaction then named for the refund (as the console does)
  POST /demo/wallet/mine              {"blocks": n}: mine n blocks (1-100)
  POST /demo/wallet/rpc               {"method", "params"}: the same account as a browser wallet
                                      (EIP-1193), which the shop's page announces (EIP-6963) to the
                                      payment button: {"result"} or {"error": {"code", "message"}}
  POST /demo/wallet/merchant/rpc      the same for the demo merchant's own wallet, its payout
                                      address (a dev account of the node under `make demo-onchain`):
                                      what the console's "Pay with my wallet" and "Collect with my
                                      wallet" use in the demo (`merchant_wallet`), where no browser
                                      wallet is installed
  POST /demo/wallet/<processId>/collect  a payout-mode payment (`make demo-onchain`): runs `collect`
                                      for the demo merchant on the payment's network, the gas paid
                                      from DEMO_COLLECT_KEY_FILE (a published dev key); the state
                                      above then shows the payout wallet's balance

The demo merchant's keys come from DEMO_MERCHANT_FILE, written by `flask --app app demo-merchant`.
"""
import json

from flask import Blueprint, current_app, redirect, render_template, request, url_for

from app.chain import collect
from app.clock import now
from app.core.jsonutil import InvalidJSON, JSONNumber, dumps_pretty, loads
from app.core.money import format_units
from app.db import get_db
from app.demo.merchant import read_keys
from app.demo.wallet import DemoWallet, WalletRequestError
from app.domain import merchants, payments, payouts, processes, refunds, setup
from app.domain.setup import SetupError
from app.domain.representation import iso
from app.evm.rpc import RpcError
from app.evm.signer import SignerError
from app.web.auth import merchant_for_secret_key
from app.web.errors import ApiError, validation_error
from app.web.http import json_response, load, parse_process_id, public_base_url, read_json_body
from app.webhooks.signing import VerificationError, verify

bp = Blueprint("demo", __name__, template_folder="templates")

NOT_SET_UP = ("The demo merchant is not set up: run `flask --app app demo-merchant` (make run does),"
              " then reload this page.")
REVOKED = ("The demo merchant's secret key in {path} no longer works: it was revoked (or rolled, and its"
           " overlap is over) in the console. Give the shop the new one: run `flask --app app"
           " demo-merchant --secret-key sk_test_…` with the key the console's Keys page showed when you"
           " rolled it (lost it? roll again there), then reload this page.")
AMOUNT_FORMAT = "Enter the amount as a number, e.g. 19.99."
DEFAULT_AMOUNT = "19.99"
FIELD_NAMES = {"amount": "amount", "order_ref": "order reference"}


def _keys():
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
    keys = _keys()
    if keys and keys.get("paymentLinkId"):  # `demo-merchant` made one: the shop shows it
        context.setdefault("payment_link", url_for("checkout.link_page", link_id=keys["paymentLinkId"]))
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
    error = _unusable(_keys())
    return _shop(503, error=error) if error else _shop()


@bp.post("/")
def checkout():
    amount_text = request.form.get("amount", "").strip()
    order_ref = request.form.get("order_ref", "").strip()
    code = request.form.get("currency", "USD")
    code = code if code in dict(CURRENCIES) else "USD"
    form = {"amount": amount_text, "order_ref": order_ref, "currency": code}
    hosted = request.form.get("hosted") == "1"  # the "Pay on a hosted page" button
    keys = _keys()
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
        return _shop(400, error=f"The preorder was not created: check the {fields}.", errors=e.errors, **form)
    process = loads(body.encode("utf-8"))
    if hosted:  # as a shop without a frontend of its own: the customer goes to the checkout page
        return redirect(url_for("checkout.checkout_page", process_id=process["processId"]), 303)
    return _shop(process_id=process["processId"], public_key=merchant.public_key,
                 amount=fields["amount"], order_ref=order_ref, currency=code)


def _preorder_fields(amount_text, order_ref, hosted=False):
    """The form through the API's own PreorderSchema: the amount text must be a JSON number literal
    (so `19.99` stays exact and `1e400`, `NaN`, `"5"` are refused as the API refuses them); the order
    reference goes into the metadata (and, `hosted`, into the description the checkout page shows,
    with the shop's success and cancel URLs). Errors are keyed by form field (amount, order_ref)."""
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
    keys = _keys()
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
    keys = _keys()
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


# --- the test wallet ----------------------------------------------------------------------------

SEND_KINDS = ("full", "partial", "over")


def _wallet():
    url = current_app.config.get("DEMO_WALLET_RPC_URL")
    if not url:
        raise ApiError(404, "not_found", "The test wallet is off: set DEMO_WALLET_RPC_URL (make demo-onchain does).")
    return DemoWallet(url)


def _demo_payment(process_id):
    """The demo merchant's process and its payment view (None before the customer's choice)."""
    keys = _keys()
    if keys is None:
        raise ApiError(503, "not_set_up", NOT_SET_UP)
    merchant = merchant_for_secret_key(keys["secretKey"])
    db = get_db()
    return payments.view(db, processes.get(db, merchant.id, process_id))


def _node_error(e):
    return ApiError(503, "node_unavailable", f"The local node did not answer as expected: {e}")


def _outstanding(view):
    """What the payment still asks for: the amount due less what was seen or confirmed (0 once
    everything is; "Send 1 more" still pays over the amount, or late)."""
    received = sum(t.amount for t in view.transfers if t.status in ("seen", "confirmed"))  # base units
    return max(view.payment.amount_due - received, 0)


@bp.get("/demo/wallet/<process_id:process_id>")
def wallet_state(process_id):
    wallet, view = _wallet(), _demo_payment(process_id)
    try:
        account, head = wallet.sender(), wallet.head()
        state = {"account": account, "head": head, "payment": None}
        if view is not None:
            p = view.payment
            asset = setup.asset(get_db(), p.asset_id, p.network_id)
            state["payment"] = {
                "token": p.token_contract, "symbol": asset.symbol if asset else p.asset_id, "address": p.address,
                "balance": format_units(wallet.balance(p.token_contract, account), p.decimals),
                "full": format_units(_outstanding(view), p.decimals),
                "refunds": [{"id": r.id, "amount": format_units(r.amount, r.decimals), "to": r.address,
                             "named": r.named_tx_hash is not None}
                            for r in refunds.list_for_process(get_db(), p.merchant_id, p.process_id)
                            if r.status == "pending"],
            }
            if p.payout_address is not None:  # the payout mode: what collect moves, and where to
                state["payout"] = {
                    "address": p.payout_address,
                    "balance": format_units(wallet.balance(p.token_contract, p.payout_address),
                                            p.decimals),
                    "atDepositAddress": format_units(wallet.balance(p.token_contract, p.address),
                                                     p.decimals),
                }
    except RpcError as e:
        raise _node_error(e) from None
    return json_response(json.dumps(state))


@bp.post("/demo/wallet/<process_id:process_id>/send")
def wallet_send(process_id):
    body = read_json_body()
    kind = body.get("kind") if isinstance(body, dict) else None
    if kind not in SEND_KINDS:
        raise validation_error({"kind": [f"Must be one of: {', '.join(SEND_KINDS)}."]})
    wallet, view = _wallet(), _demo_payment(process_id)
    if view is None:
        raise ApiError(409, "invalid_state", "Choose a coin and network in the payment button first.")
    p = view.payment
    full = _outstanding(view)
    if kind in ("full", "partial") and not full:
        raise ApiError(409, "invalid_state", "The payment is paid in full: \"Send 1 more\" pays over it.")
    amount = {"full": full, "partial": max(full // 2, 1), "over": full + 10 ** p.decimals}[kind]
    try:
        sent = wallet.transfer(p.token_contract, p.address, amount)
    except RpcError as e:
        raise _node_error(e) from None
    return json_response(json.dumps({"txHash": sent.tx_hash, "blockNumber": sent.block_number,
                                     "amount": format_units(amount, p.decimals), "to": p.address}))


@bp.post("/demo/wallet/<process_id:process_id>/refunds/<refund_id>")
def wallet_refund(process_id, refund_id):
    """Pay a pending refund of the order, as its merchant would (the module's docstring)."""
    wallet, view = _wallet(), _demo_payment(process_id)
    if view is None:
        raise ApiError(409, "invalid_state", "This order has no on-chain payment to refund.")
    p = view.payment
    refund = next((r for r in refunds.list_for_process(get_db(), p.merchant_id, process_id)
                   if r.id == refund_id and r.status == "pending"), None)
    if refund is None:
        raise ApiError(404, "not_found", "No pending refund of this order with that id.")
    try:
        own = p.payout_address is not None and wallet.unlocked(p.payout_address)
        if not own:  # the order's deposit address: the merchant's too (its wallet holds the key)
            wallet.impersonate(p.address)
        sent = wallet.transfer(refund.token_contract, refund.address, refund.amount,
                               sender=p.payout_address if own else p.address)
    except RpcError as e:
        raise _node_error(e) from None
    if not own:  # not the payout address: only its named transaction settles it
        refunds.name_transaction(get_db(), p.merchant_id, process_id, refund.id, sent.tx_hash, now())
    return json_response(json.dumps({"txHash": sent.tx_hash, "blockNumber": sent.block_number,
                                     "amount": format_units(refund.amount, refund.decimals),
                                     "to": refund.address,
                                     "from": "payout wallet" if own else "deposit address"}))


@bp.post("/demo/wallet/mine")
def wallet_mine():
    body = read_json_body()
    blocks = body.get("blocks", JSONNumber("1")) if isinstance(body, dict) else None
    if not (isinstance(blocks, JSONNumber) and blocks.isdigit() and 1 <= int(blocks) <= 100):
        raise validation_error({"blocks": ["Must be a whole number from 1 to 100."]})
    blocks = int(blocks)
    wallet = _wallet()
    try:
        head = wallet.mine(blocks)
    except RpcError as e:
        raise _node_error(e) from None
    return json_response(json.dumps({"head": head}))


def merchant_wallet(merchant_id):
    """The console's offer of the demo's test wallet as `merchant_id`'s own browser wallet:
    {"account", "rpc"} when it is the demo merchant and has a payout address (the node's dev
    account under `make demo-onchain`), else None. No node call: the wallet answers when used."""
    keys = _keys() if current_app.config.get("DEMO_WALLET_RPC_URL") else None
    if keys is None or keys["merchantId"] != merchant_id:
        return None
    account = payouts.payout_of(get_db(), merchant_id)
    return {"account": account, "rpc": url_for("demo.wallet_merchant_rpc")} if account else None


@bp.post("/demo/wallet/merchant/rpc")
def wallet_merchant_rpc():
    """One EIP-1193 request of the demo merchant's own wallet: its payout address, when the node
    signs for it."""
    keys = _keys()
    account = payouts.payout_of(get_db(), keys["merchantId"]) if keys else None
    if account is None:
        raise ApiError(409, "invalid_state", "The demo merchant has no payout address: make demo-onchain sets one.")
    return wallet_rpc(account)


@bp.post("/demo/wallet/rpc")
def wallet_rpc(account=None):
    """One EIP-1193 request of the shop's browser wallet (app/demo/wallet.py DemoWallet.request)."""
    body = read_json_body()
    method = body.get("method") if isinstance(body, dict) else None
    params = body.get("params", []) if isinstance(body, dict) else None
    if not isinstance(method, str) or not isinstance(params, list):
        raise validation_error({"method": ["Must be a JSON string, with `params` a JSON array."]})
    wallet = _wallet()
    try:
        if account is not None and not wallet.unlocked(account):
            raise WalletRequestError(4100, f"The local node does not sign for {account}: this wallet"
                                     " works under make demo-onchain only.")
        answer = {"result": wallet.request(method, params, account)}
    except WalletRequestError as e:
        answer = {"error": {"code": e.code, "message": str(e)}}
    except RpcError as e:
        answer = {"error": {"code": -32603, "message": str(e)}}
    return json_response(json.dumps(answer))


@bp.post("/demo/wallet/<process_id:process_id>/collect")
def wallet_collect(process_id):
    """`collect` for the demo merchant on the payment's network, as the operator runs it."""
    _wallet()
    key_file = current_app.config.get("DEMO_COLLECT_KEY_FILE")
    if not key_file:
        raise ApiError(404, "not_found",
                       "Collecting is off: set DEMO_COLLECT_KEY_FILE (make demo-onchain does).")
    view = _demo_payment(process_id)
    if view is None or view.payment.payout_address is None:
        raise ApiError(409, "invalid_state",
                       "This order's payment is not in the payout mode: nothing to collect.")
    p = view.payment
    try:
        report = collect.collect(get_db(), p.network_id, key_file, merchant_id=p.merchant_id, now=now())
    except (SetupError, SignerError) as e:
        raise ApiError(503, "not_set_up", str(e)) from None
    if report.error:
        raise ApiError(503, "collect_failed", report.error)
    moved = sum(i.amount for b in report.batches for i in b.moved if i.token == p.token_contract)
    moved += sum(i.amount for _, items, first in report.settled if first for i in items
                 if i.token == p.token_contract)
    return json_response(json.dumps({
        "amount": format_units(moved, p.decimals),
        "transactions": [b.collection.tx_hash for b in report.batches if b.collection is not None],
        "to": p.payout_address}))
