"""Payment links, the merchant API's side (x-secret-key): create, list, read and deactivate them.
The customer's side, the link's page and its click, is app/web/checkout.py."""
from flask import Blueprint, current_app, g, request

from app.clock import now
from app.db import get_db
from app.domain import links
from app.domain.representation import link_json, link_list_json
from app.web.auth import refuse_browsers, require_secret_key
from app.web.errors import validation_error
from app.web.http import json_response, load, load_json_body, public_base_url
from app.web.schemas import LinkSchema, ListQuerySchema

bp = Blueprint("links_api", __name__, url_prefix="/payment-button")
bp.before_request(refuse_browsers)

_LINK_ID = r"link_[0-9a-f]{24}"
_list_query = ListQuerySchema(only=("limit", "starting_after"))


def _shown(link, paid=None):
    db = get_db()
    if paid is None:
        paid = links.payments(db, [link]).get(link.id, 0)
    return link_json(link, paid, public_base_url(), now())


@bp.post("/links")
@require_secret_key
def create_link():
    fields = load_json_body(LinkSchema(current_app.extensions["preorder_schema"].limits))
    link = links.create(
        get_db(), g.merchant, amount=fields["amount"], description=fields["description"],
        now=now(), currency=fields.get("currency"), metadata=fields["metadata"],
        success_url=fields.get("successUrl"), max_payments=fields.get("maxPayments"),
        expires_at=fields.get("expiresAt"))
    return json_response(_shown(link, 0))


@bp.get("/links")
@require_secret_key
def list_links():
    query = load(_list_query, request.args.to_dict(flat=True))
    db = get_db()
    try:
        found, has_more = links.page(db, g.merchant.id, limit=query.get("limit", 20),
                                     starting_after=query.get("starting_after"))
    except links.LinkNotFound:
        raise validation_error({"starting_after": ["No such link."]}) from None
    return json_response(link_list_json(found, links.payments(db, found), has_more,
                                        public_base_url(), now()))


@bp.get("/links/<link_id>")
@require_secret_key
def get_link(link_id):
    return json_response(_shown(links.get(get_db(), g.merchant.id, link_id)))


@bp.post("/links/<link_id>/deactivate")
@require_secret_key
def deactivate_link(link_id):
    return json_response(_shown(links.deactivate(get_db(), g.merchant.id, link_id, now())))
