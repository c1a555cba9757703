"""The Button API (x-public-key): what the payment button calls from the customer's browser.

CORS is open on every response of this blueprint (errors included, so the button can show their
message); metadata is never shown here.
"""
import json
import re

from flask import Blueprint, current_app, g, request, send_from_directory

from app import payments, processes
from app.auth import require_public_key
from app.clock import now
from app.db import get_db
from app.errors import ApiError
from app.http import json_response, load_json_body
from app.representation import public_process_json
from app.schemas import ConfirmSchema, SandboxPaySchema

bp = Blueprint("button_api", __name__, url_prefix="/payment-button")

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, x-public-key",
    "Access-Control-Expose-Headers": "Date",  # the button corrects its countdown for clock skew
    "Access-Control-Max-Age": "600",
}
_sandbox_pay = SandboxPaySchema()
_confirm = ConfirmSchema()


# The button's paths, also when the router itself answers (a 405 or 404 never reaches the blueprint).
BUTTON_PATHS = re.compile(
    r"/payment-button/(?:process/[^/]+/(?:public|sandbox/pay|confirm)|button\.js|assets)"
)


@bp.after_app_request
def open_cors(response):
    if request.blueprint == bp.name or BUTTON_PATHS.fullmatch(request.path):
        response.headers.update(CORS_HEADERS)
        response.vary.add("Origin")
    return response


@bp.get("/process/<process_id:process_id>/public")
@require_public_key
def public_process(process_id):
    db = get_db()
    process = processes.get(db, g.merchant.id, process_id)
    return json_response(public_process_json(process, now(), payments.view(db, process)))


@bp.get("/assets")
@require_public_key
def assets():
    """What the customer may pay with (empty for a merchant without an xpub)."""
    return json_response(json.dumps({"data": payments.payable_assets(get_db(), g.merchant)},
                                    ensure_ascii=False, separators=(",", ":")))


@bp.post("/process/<process_id:process_id>/confirm")
@require_public_key
def confirm(process_id):
    db = get_db()
    processes.get(db, g.merchant.id, process_id)  # 404 before anything else about it
    choice = load_json_body(_confirm)
    current = now()
    process, payment = payments.confirm(
        db, g.merchant, process_id, asset_id=choice["assetId"], network_id=choice["networkId"],
        now=current,
    )
    return json_response(public_process_json(process, current, payment))


@bp.post("/process/<process_id:process_id>/sandbox/pay")
@require_public_key
def sandbox_pay(process_id):
    db = get_db()
    processes.get(db, g.merchant.id, process_id)  # 404 before anything else about it
    if g.merchant.livemode:
        raise ApiError(
            403, "sandbox_only", "Sandbox payments are only for test-mode merchants (pk_test_ keys)."
        )
    outcome = load_json_body(_sandbox_pay)["outcome"]
    if outcome == "success":
        process = processes.complete(db, process_id, now(), merchant_id=g.merchant.id)
        return json_response(
            public_process_json(process, process.updated_at, payments.view(db, process))
        )
    process = processes.record_failed_payment(db, process_id, now(), merchant_id=g.merchant.id)
    return json_response(public_process_json(process, now(), payments.view(db, process)))


@bp.get("/button.js")
def button_js():
    response = send_from_directory(
        current_app.static_folder, "button.js", mimetype="text/javascript", max_age=300
    )
    return response
