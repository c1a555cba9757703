"""The Button API (x-public-key): what the payment button calls from the customer's browser.

CORS is open on every response of this blueprint (errors included, so the button can show their
message); metadata is never shown here.
"""
import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

from flask import Blueprint, Response, current_app, g, request, send_file

from app.chain import relayer
from app.clock import now
from app.core.jsonutil import dumps_compact
from app.db import get_db
from app.domain import payments, processes, setup
from app.domain.representation import payment_uri, public_process_json
from app.web import qr
from app.web.auth import require_public_key
from app.web.errors import ApiError, validation_error
from app.web.http import client_address, json_response, load_json_body, parse_process_id
from app.web.schemas import AuthorizationSchema, ConfirmSchema, SandboxPaySchema

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
_authorization = AuthorizationSchema()


# The button's paths, also when the router itself answers (a 405 or 404 never reaches the
# blueprint).
BUTTON_PATHS = re.compile(
    r"/payment-button/(?:process/[^/]+/(?:public|qr\.svg|sandbox/pay|confirm|authorization)"
    r"|button\.js|button/[^/]*|assets)"
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
    view = payments.view(db, process)
    return json_response(public_process_json(process, now(), view, _network_state(db, view)))


@bp.get("/process/<process_id:process_id>/qr.svg")
@require_public_key
def payment_qr(process_id):
    """The QR code of the payment's `paymentUri` as SVG, drawn here (app/web/qr.py) so that the
    button carries no encoder and the customer's browser asks no third party; 404 before a payment
    is chosen. The button asks again only when the URI changes; never stored by the browser, since
    the URI follows what is still outstanding."""
    db = get_db()
    view = payments.view(db, processes.get(db, g.merchant.id, process_id))
    if view is None:
        raise ApiError(404, "not_found",
                       "This process has no payment yet: the customer chooses one first.")
    response = Response(qr.svg(payment_uri(view)), mimetype="image/svg+xml")
    response.headers["Cache-Control"] = "no-store"
    return response


def _stale_seconds():
    return current_app.config["NETWORK_STALE_SECONDS"]


def _network_state(db, view):
    """The chosen network's health for the button ("ok", "unavailable"); None before a choice."""
    if view is None:
        return None
    return setup.network_state(db, view.payment.network_id, now(), _stale_seconds())


@bp.get("/assets")
@require_public_key
def assets():
    """What the customer may pay with (empty for a merchant without an xpub). A network entry of
    an ERC-3009 asset also carries its `eip712Domain` and whether it can be paid without gas now
    (`gasless`: a relayer is set, below its hourly cap, with gas on that network). With
    `?processId=`, only what can be quoted for that process now, with each network's `amountDue`."""
    db, current = get_db(), now()
    process = None
    if "processId" in request.args:
        process_id = parse_process_id(request.args["processId"])
        if process_id is None:
            raise validation_error({"processId": ["Must be a process id (a UUID)."]})
        process = processes.get(db, g.merchant.id, process_id)  # another merchant's: 404
    data = payments.payable_assets(db, g.merchant, current, _stale_seconds(), process)
    networks, deadline = {}, relayer.request_deadline(current_app.config)  # one for every node
    for asset in data:
        for entry in asset["networks"]:
            if "eip712Domain" in entry:
                if entry["id"] not in networks:
                    networks[entry["id"]] = relayer.available(
                        db, current_app.config, setup.network(db, entry["id"]), current,
                        current_app.extensions.setdefault("relayer_gas", {}), deadline)
                entry["gasless"] = networks[entry["id"]]
    return json_response(dumps_compact({"data": data}))


@bp.post("/process/<process_id:process_id>/confirm")
@require_public_key
def confirm(process_id):
    db = get_db()
    processes.get(db, g.merchant.id, process_id)  # 404 before anything else about it
    choice = load_json_body(_confirm)
    current = now()
    process, payment = payments.confirm(
        db, g.merchant, process_id, asset_id=choice["assetId"], network_id=choice["networkId"],
        now=current, stale_seconds=_stale_seconds(),
    )
    return json_response(public_process_json(process, current, payment, "ok"))


@bp.post("/process/<process_id:process_id>/authorization")
@require_public_key
def authorization(process_id):
    """A payer's signed ERC-3009 authorization, submitted by the relayer: 202 {"txHash"}. One
    deadline over every node call it makes (REQUEST_NODE_DEADLINE_SECONDS, from here). The client
    address's refused authorizations (400, 409) are counted: past the relayer's limits, 429 before
    anything else (`relayer.admit`; `_count_refusal` keeps the count once the answer is known)."""
    deadline = relayer.request_deadline(current_app.config)
    db = get_db()
    g.relay_refusal = relayer.admit(db, client_address(), process_id, now())
    processes.get(db, g.merchant.id, process_id)  # 404 before anything else about it
    fields = load_json_body(_authorization)
    tx_hash = relayer.submit(db, current_app.config, g.merchant, process_id, fields, now(),
                             deadline=deadline)
    return json_response(dumps_compact({"txHash": tx_hash}), status=202)


@bp.after_request
def _count_refusal(response):
    """After an authorization's answer (an error's too): a 400 or a 409 stays counted against its
    client address; any other answer is not a refusal."""
    reservation = g.pop("relay_refusal", None)
    if reservation is not None:
        try:
            relayer.settle_refusal(get_db(), reservation, response.status_code in (400, 409))
        except Exception:  # the answer stands; the request stays counted (for its window)
            current_app.logger.exception("authorization: its count not settled")
    return response


@bp.post("/process/<process_id:process_id>/sandbox/pay")
@require_public_key
def sandbox_pay(process_id):
    db = get_db()
    processes.get(db, g.merchant.id, process_id)  # 404 before anything else about it
    if g.merchant.livemode:
        raise ApiError(
            403, "sandbox_only",
            "Sandbox payments are only for test-mode merchants (pk_test_ keys)."
        )
    outcome = load_json_body(_sandbox_pay)["outcome"]
    if outcome == "success":
        process = processes.complete(db, process_id, now(), merchant_id=g.merchant.id, by="sandbox")
        view = payments.view(db, process)
        return json_response(
            public_process_json(process, process.updated_at, view, _network_state(db, view))
        )
    process = processes.record_failed_payment(db, process_id, now(), merchant_id=g.merchant.id)
    view = payments.view(db, process)
    return json_response(public_process_json(process, now(), view, _network_state(db, view)))


@dataclass(frozen=True)
class Script:
    body: bytes
    etag: str  # of the content: the same in every worker and after a restart with the same file
    last_modified: float  # unix seconds


STATIC = Path(__file__).resolve().parent.parent / "static"
# What the files of the button's folder are served as: its modules and its style sheet.
MIMETYPES = {".js": "text/javascript", ".css": "text/css"}


def load_button_script(path=STATIC / "button.js"):
    """A file of the button as served: button.js (the classic script a merchant's page includes,
    which imports the modules of app/static/button/), or one of those modules or its style sheet."""
    body = path.read_bytes()
    return Script(body=body, etag=hashlib.sha256(body).hexdigest()[:32],
                  last_modified=path.stat().st_mtime)


def load_button_files(folder=STATIC / "button"):
    """Every file the button imports or links, by name: the .js and .css files of its folder (not
    its subfolders), read once like button.js."""
    return {path.name: load_button_script(path) for path in sorted(folder.iterdir())
            if path.is_file() and path.suffix in MIMETYPES}


BUTTON_SCRIPT = load_button_script()  # once, when the app is imported
BUTTON_FILES = load_button_files()


def _send_script(script, mimetype, name, max_age=300):
    """A file of the button, revalidated by its ETag: button.js after 5 minutes; its modules and
    style sheet at every load (`max_age` None: no-cache, a 304 while unchanged), so a browser never
    runs a new module beside an old one it kept, whatever each file's age."""
    return send_file(
        io.BytesIO(script.body), mimetype=mimetype, download_name=name,
        max_age=max_age, etag=script.etag, last_modified=script.last_modified,
    )


@bp.get("/button.js")
def button_js():
    return _send_script(BUTTON_SCRIPT, "text/javascript", "button.js")


@bp.get("/button/<name>")
def button_file(name):
    """A module or the style sheet of the button (app/static/button/), fetched by button.js from
    the merchant's page: module scripts are fetched in CORS mode, and CORS is open here as on the
    whole blueprint. Only the files of that folder; anything else is 404."""
    script = BUTTON_FILES.get(name)
    if script is None:
        raise ApiError(404, "not_found", "No such resource.")
    return _send_script(script, MIMETYPES[Path(name).suffix], name, max_age=None)
