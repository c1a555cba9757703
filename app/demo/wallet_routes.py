"""The demo shop's test wallet, with DEMO_WALLET_RPC_URL set (a local Hardhat node: `make
demo-onchain`): a dev account of the node (wallet.py) that pays the order on the shop's page on
chain, on the shop's blueprint (routes.py).

  GET  /demo/wallet/<processId>       the dev account, its balance of the payment's token, the head
  POST /demo/wallet/<processId>/send  {"kind": "full" | "partial" | "over"}: a token transfer to the
                                      payment's address of what is outstanding, half of it, or
                                      one token more
  POST /demo/wallet/<processId>/refunds/<refundId>  pays a pending refund of the order: from the
                                      merchant's payout wallet when the node signs for it (the
                                      watcher then finds it by itself), else from the order's
                                      deposit address (the merchant's: the node impersonates it),
                                      the transaction then named for the refund (as the console
                                      does)
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
"""
import json

from flask import current_app, url_for

from app.chain import collect
from app.clock import now
from app.core.jsonutil import JSONNumber, dumps_compact
from app.core.money import format_units
from app.db import get_db
from app.demo.routes import NOT_SET_UP, bp, demo_keys
from app.demo.wallet import DemoWallet, WalletRequestError
from app.domain import payments, payouts, processes, refunds, setup
from app.domain.setup import SetupError
from app.evm.rpc import RpcError
from app.evm.signer import SignerError
from app.web.auth import merchant_for_secret_key
from app.web.errors import ApiError, validation_error
from app.web.http import json_response, read_json_body

SEND_KINDS = ("full", "partial", "over")


def _wallet():
    url = current_app.config.get("DEMO_WALLET_RPC_URL")
    if not url:
        raise ApiError(404, "not_found", "The test wallet is off: set DEMO_WALLET_RPC_URL"
                       " (make demo-onchain does).")
    return DemoWallet(url)


def _demo_payment(process_id):
    """The demo merchant's process and its payment view (None before the customer's choice)."""
    keys = demo_keys()
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
    # base units
    received = sum(t.amount for t in view.transfers if t.status in ("seen", "confirmed"))
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
                "token": p.token_contract, "symbol": asset.symbol if asset else p.asset_id,
                "address": p.address,
                "balance": format_units(wallet.balance(p.token_contract, account), p.decimals),
                "full": format_units(_outstanding(view), p.decimals),
                "refunds": [{"id": r.id, "amount": format_units(r.amount, r.decimals),
                             "to": r.address, "named": r.named_tx_hash is not None}
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
    return json_response(dumps_compact(state))


@bp.post("/demo/wallet/<process_id:process_id>/send")
def wallet_send(process_id):
    body = read_json_body()
    kind = body.get("kind") if isinstance(body, dict) else None
    if kind not in SEND_KINDS:
        raise validation_error({"kind": [f"Must be one of: {', '.join(SEND_KINDS)}."]})
    wallet, view = _wallet(), _demo_payment(process_id)
    if view is None:
        raise ApiError(409, "invalid_state",
                       "Choose a coin and network in the payment button first.")
    p = view.payment
    full = _outstanding(view)
    if kind in ("full", "partial") and not full:
        raise ApiError(409, "invalid_state",
                       "The payment is paid in full: \"Send 1 more\" pays over it.")
    amount = {"full": full, "partial": max(full // 2, 1), "over": full + 10 ** p.decimals}[kind]
    try:
        sent = wallet.transfer(p.token_contract, p.address, amount)
    except RpcError as e:
        raise _node_error(e) from None
    return json_response(dumps_compact({
        "txHash": sent.tx_hash, "blockNumber": sent.block_number,
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
        refunds.name_transaction(get_db(), p.merchant_id, process_id, refund.id, sent.tx_hash,
                                 now())
    return json_response(dumps_compact({
        "txHash": sent.tx_hash, "blockNumber": sent.block_number,
        "amount": format_units(refund.amount, refund.decimals), "to": refund.address,
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
    return json_response(dumps_compact({"head": head}))


def merchant_wallet(merchant_id):
    """The console's offer of the demo's test wallet as `merchant_id`'s own browser wallet:
    {"account", "rpc"} when it is the demo merchant and has a payout address (the node's dev
    account under `make demo-onchain`), else None. No node call: the wallet answers when used."""
    keys = demo_keys() if current_app.config.get("DEMO_WALLET_RPC_URL") else None
    if keys is None or keys["merchantId"] != merchant_id:
        return None
    account = payouts.payout_of(get_db(), merchant_id)
    return {"account": account, "rpc": url_for("demo.wallet_merchant_rpc")} if account else None


@bp.post("/demo/wallet/merchant/rpc")
def wallet_merchant_rpc():
    """One EIP-1193 request of the demo merchant's own wallet: its payout address, when the node
    signs for it."""
    keys = demo_keys()
    account = payouts.payout_of(get_db(), keys["merchantId"]) if keys else None
    if account is None:
        raise ApiError(409, "invalid_state",
                       "The demo merchant has no payout address: make demo-onchain sets one.")
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
            raise WalletRequestError(4100, f"The local node does not sign for {account}: this"
                                     " wallet works under make demo-onchain only.")
        answer = {"result": wallet.request(method, params, account)}
    except WalletRequestError as e:
        answer = {"error": {"code": e.code, "message": str(e)}}
    except RpcError as e:
        answer = {"error": {"code": -32603, "message": str(e)}}
    # The node's answer relayed as parsed: a node's JSON, not ours (the one writer refuses floats).
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
        report = collect.collect(get_db(), p.network_id, key_file, merchant_id=p.merchant_id,
                                 now=now())
    except (SetupError, SignerError) as e:
        raise ApiError(503, "not_set_up", str(e)) from None
    if report.error:
        raise ApiError(503, "collect_failed", report.error)
    moved = sum(i.amount for b in report.batches for i in b.moved if i.token == p.token_contract)
    moved += sum(i.amount for _, items, first in report.settled if first for i in items
                 if i.token == p.token_contract)
    return json_response(dumps_compact({
        "amount": format_units(moved, p.decimals),
        "transactions": [b.collection.tx_hash for b in report.batches if b.collection is not None],
        "to": p.payout_address}))
