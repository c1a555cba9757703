"""The merchant API (x-secret-key): create, read, list and cancel payment processes; refund them."""
from flask import Blueprint, current_app, g, request

from app.clock import now
from app.db import get_db
from app.domain import payments, processes, refunds, unexpected
from app.domain.representation import (
    page_json,
    process_json,
    refund_json,
    refund_list_json,
)
from app.web.auth import refuse_browsers, require_secret_key
from app.web.errors import validation_error
from app.web.http import (
    ascii_param,
    json_response,
    load,
    load_json_body,
    parse_process_id,
    public_base_url,
)
from app.web.schemas import ListQuerySchema, RefundSchema, RefundTransactionSchema

bp = Blueprint("merchant_api", __name__, url_prefix="/payment-button")
bp.before_request(refuse_browsers)

DEFAULT_PAGE_SIZE = 20
_list_query = ListQuerySchema()
_refund = RefundSchema()
_refund_transaction = RefundTransactionSchema()


def _idempotency_key():
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    limit = current_app.config["IDEMPOTENCY_KEY_MAX_LENGTH"]
    if not key.strip() or len(key) > limit:
        raise validation_error(
            {"Idempotency-Key": [f"Must be 1 to {limit} characters, not blank."]}
        )
    return key


def _answer(body, replayed):
    """An idempotent request's answer: a replayed one says so (docs/contract.md,
    Idempotency-Key)."""
    response = json_response(body)
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


@bp.post("/process/preorder")
@require_secret_key
def create_preorder():
    idempotency_key = _idempotency_key()
    fields = load_json_body(current_app.extensions["preorder_schema"])
    body, replayed = processes.create_preorder(
        get_db(),
        g.merchant,
        amount=fields["amount"],
        metadata=fields["metadata"],
        now=now(),
        ttl=current_app.config["PROCESS_TTL_SECONDS"],
        idempotency_key=idempotency_key,
        idempotency_ttl=current_app.config["IDEMPOTENCY_TTL_SECONDS"],
        currency=fields.get("currency"),
        description=fields.get("description"),
        success_url=fields.get("successUrl"),
        cancel_url=fields.get("cancelUrl"),
        checkout_base=public_base_url(),
    )
    return _answer(body, replayed)


@bp.get("/process/<process_id:process_id>")
@require_secret_key
def get_process(process_id):
    db = get_db()
    process = processes.get(db, g.merchant.id, process_id)
    return json_response(process_json(process, now(), payments.view(db, process),
                                      refunds.list_for_process(db, g.merchant.id, process_id)))


@bp.get("/processes")
@require_secret_key
def list_processes():
    query = load(_list_query, request.args.to_dict(flat=True))
    starting_after = query.get("starting_after")
    anchor = parse_process_id(starting_after) if starting_after is not None else None
    current = now()
    try:
        if starting_after is not None and anchor is None:
            raise processes.ProcessNotFound(starting_after)
        items, has_more = processes.page(
            get_db(),
            g.merchant.id,
            now=current,
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            status=query.get("status"),
            starting_after=anchor,
        )
    except processes.ProcessNotFound:
        raise validation_error({"starting_after": ["No such process."]}) from None
    db = get_db()
    return json_response(page_json(items, has_more, current, payments.views(db, items),
                                   refunds.of_processes(db, items)))


@bp.post("/process/<process_id:process_id>/cancel")
@require_secret_key
def cancel_process(process_id):
    db = get_db()
    process = processes.cancel(db, process_id, now(), merchant_id=g.merchant.id)
    return json_response(process_json(process, process.updated_at, payments.view(db, process),
                                      refunds.list_for_process(db, g.merchant.id, process_id)))


@bp.post("/process/<process_id:process_id>/refunds")
@require_secret_key
def create_refund(process_id):
    idempotency_key = _idempotency_key()
    fields = load_json_body(_refund)
    asked = dict(amount=fields["amount"], address=fields["address"], reason=fields.get("reason"),
                 now=now())
    if idempotency_key is None:
        return json_response(refund_json(refunds.create(get_db(), g.merchant.id, process_id,
                                                        **asked)))
    body, replayed = refunds.create_once(
        get_db(), g.merchant.id, process_id, **asked, idempotency_key=idempotency_key,
        idempotency_ttl=current_app.config["IDEMPOTENCY_TTL_SECONDS"])
    return _answer(body, replayed)


@bp.get("/process/<process_id:process_id>/refunds")
@require_secret_key
def list_refunds(process_id):
    return json_response(refund_list_json(refunds.list_for_process(get_db(), g.merchant.id,
                                                                   process_id)))


@bp.post("/process/<process_id:process_id>/refunds/<refund_id>/transaction")
@require_secret_key
def name_refund_transaction(process_id, refund_id):
    fields = load_json_body(_refund_transaction)
    refund = refunds.name_transaction(get_db(), g.merchant.id, process_id, refund_id,
                                      fields["txHash"], now())
    return json_response(refund_json(refund))


@bp.delete("/process/<process_id:process_id>/refunds/<refund_id>")
@require_secret_key
def cancel_refund(process_id, refund_id):
    refund = refunds.cancel(get_db(), g.merchant.id, process_id, refund_id, now())
    return json_response(refund_json(refund))


@bp.post("/process/<process_id:process_id>/unexpected-transfers/<transfer>/accept")
@require_secret_key
def accept_unexpected_transfer(process_id, transfer):
    """An unexpected transfer (`<txHash>:<logIndex>`) of a registered asset accepted as payment
    (app/domain/unexpected.py); the Process object as it is after it. No body is read. A key with
    a character outside ASCII (`³`, `٣`) is 400 validation_error naming `transfer`: never read as
    the ASCII key it resembles."""
    ascii_param(transfer, "transfer")
    key = request.headers.get("x-secret-key", "")
    db = get_db()
    process, view = unexpected.accept(db, g.merchant.id, process_id, transfer,
                                      f"secret key {key[:12]}…", now())
    return json_response(process_json(process, now(), view,
                                      refunds.list_for_process(db, g.merchant.id, process_id)))
