"""Webhook endpoints, the merchant API's side (x-secret-key): add, list, change, roll the secret of
and delete the places a merchant's events are delivered to (docs/webhooks.md, "Several endpoints").
"""
from flask import Blueprint, current_app, g, request

from app.clock import now
from app.db import get_db
from app.domain import endpoints, merchants
from app.domain.representation import endpoint_json, endpoint_list_json
from app.web.auth import refuse_browsers, require_secret_key
from app.web.http import json_response, load_json_body
from app.web.schemas import EndpointSchema, RollSecretSchema

bp = Blueprint("endpoints_api", __name__, url_prefix="/payment-button/webhook-endpoints")
bp.before_request(refuse_browsers)

_create = EndpointSchema()
_update = EndpointSchema(partial=True)
_roll = RollSecretSchema()


def _loopback():
    return current_app.config["WEBHOOK_ALLOW_LOOPBACK"]


def _events(fields):
    if "events" in fields:
        fields["events"] = endpoints.parse_events(fields["events"])
    return fields


@bp.post("")
@require_secret_key
def create_endpoint():
    fields = _events(load_json_body(_create))
    if fields.get("enabled") is False:
        fields.pop("enabled")  # made enabled; disabling is an update
    endpoint, _ = endpoints.create(
        get_db(), g.merchant, url=fields["url"], events=fields.get("events", endpoints.ALL),
        description=fields.get("description"), now=now(), allow_loopback=_loopback())
    return json_response(endpoint_json(endpoint, endpoint.secret))


@bp.get("")
@require_secret_key
def list_endpoints():
    return json_response(endpoint_list_json(endpoints.list_of(get_db(), g.merchant.id)))


@bp.post("/<endpoint_id>")
@require_secret_key
def update_endpoint(endpoint_id):
    fields = _events(load_json_body(_update))
    endpoint, _ = endpoints.update(get_db(), g.merchant, endpoint_id, now=now(),
                                   allow_loopback=_loopback(), **fields)
    return json_response(endpoint_json(endpoint))


@bp.post("/<endpoint_id>/roll-secret")
@require_secret_key
def roll_secret(endpoint_id):
    fields = load_json_body(_roll) if request.content_length or request.headers.get(
        "Transfer-Encoding") else {}  # no body: the default overlap
    overlap = merchants.roll_overlap_seconds(current_app.config, fields.get("overlapHours"))
    secret = endpoints.roll_secret(get_db(), g.merchant.id, endpoint_id, now(), overlap)
    return json_response(endpoint_json(endpoints.get(get_db(), g.merchant.id, endpoint_id), secret))


@bp.post("/<endpoint_id>/delete")
@require_secret_key
def delete_endpoint(endpoint_id):
    endpoint = endpoints.delete(get_db(), g.merchant.id, endpoint_id, now())
    return json_response(endpoint_json(endpoint, deleted=True))
