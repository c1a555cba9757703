"""The webhooks page: the merchant's endpoints (added, edited, disabled, rolled, deleted by an
owner), a test event to one of them, the failing deliveries and replaying them, and the merchant's
events with their delivery states, filtered by type, state and endpoint. Nothing here waits on an
endpoint: a test event and a resend go through the outbox (docs/console.md "Webhooks").

  GET  /dashboard/webhooks; POST /dashboard/webhooks/endpoints, /webhooks/endpoints/<id>,
  /webhooks/endpoints/<id>/{disable,enable,roll-secret,delete,test}; /webhooks/url and
  /webhooks/test (the first endpoint's), /webhooks/replay-failed
"""
from flask import current_app, g, render_template, request, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp, when
from app.console.security import PageError, login_required, not_found, owner_required
from app.db import get_db
from app.domain import endpoints, merchants, outbox


@bp.get("/webhooks")
@login_required
def webhooks_page(notice=None, error=None, status=200, new_secret=None):
    db = get_db()
    notice = notice or pages.notice()
    mine = endpoints.list_of(db, g.merchant.id)
    failing = outbox.failing(db, g.merchant.id)
    tests = outbox.tests_of(db, g.merchant.id)
    refresh = pages.refresh(url_for("dashboard.webhooks_page"), [event for event, _ in tests],
                            now())
    chosen = {name: request.args.get(name, "").strip() for name in ("type", "state", "endpoint")}
    types = (*outbox.EVENT_TYPES, outbox.TEST_EVENT_TYPE)
    if chosen["type"] not in ("", *types) or chosen["state"] not in ("", *outbox.DELIVERY_STATES) \
            or chosen["endpoint"] not in ("", *(e.id for e in mine)):
        raise PageError(400, "No such filter",
                        "Choose an event type, a delivery state and an endpoint from the lists.")
    events, more = outbox.page_of(db, g.merchant.id, type=chosen["type"] or None,
                                  state=chosen["state"] or None,
                                  endpoint_id=chosen["endpoint"] or None,
                                  before=request.args.get("before"))
    query = {k: v for k, v in chosen.items() if v}
    older = (url_for("dashboard.webhooks_page", **query, before=events[-1][0].id, _anchor="events")
             if more else None)
    return render_template(
        "dashboard/webhooks.html", endpoints=mine, names={e.id: _name(e) for e in mine},
        failing=failing, notice=notice, error=error, tests=tests, refresh=refresh, events=events,
        chosen=chosen, types=types, event_types=outbox.EVENT_TYPES, states=outbox.DELIVERY_STATES,
        older=older, new_secret=new_secret, limit=endpoints.MAX_ENDPOINTS), status


def _name(endpoint):
    """How the page names an endpoint: its description, else its URL's start."""
    return endpoint.description or (endpoint.url if len(endpoint.url) <= 48 else
                                     endpoint.url[:47] + "…")


def _loopback():
    return current_app.config["WEBHOOK_ALLOW_LOOPBACK"]


def _form_events():
    """The Events checkboxes: "*" (every event) wins over single types."""
    chosen = request.form.getlist("events")
    return endpoints.parse_events(["*"] if "*" in chosen else chosen)


def _mine(endpoint_id):
    try:
        return endpoints.get(get_db(), g.merchant.id, endpoint_id)
    except endpoints.EndpointNotFound:
        raise not_found() from None


def _secret_shown(title, secret, note):
    return webhooks_page(new_secret={"title": title, "value": secret, "note": note})


@bp.post("/webhooks/endpoints")
@login_required
@owner_required
def add_endpoint():
    """The secret is shown on the page answering the POST, once."""
    try:
        endpoint, warning = endpoints.create(
            get_db(), g.merchant, url=request.form.get("url", "").strip(), events=_form_events(),
            description=request.form.get("description", "").strip() or None, now=now(),
            allow_loopback=_loopback())
    except (endpoints.EndpointError, endpoints.EndpointLimit) as e:
        return webhooks_page(error=str(e), status=400 if isinstance(e, endpoints.EndpointError)
                             else 409)
    note = "Put it in this endpoint's receiver now: it is shown this once."
    if warning:
        note += (" Its host name does not resolve now: deliveries to it are refused until it does"
                 " (each delivery checks it again).")
    return _secret_shown(f"Endpoint added: {_name(endpoint)}", endpoint.secret, note)


@bp.post("/webhooks/endpoints/<endpoint_id>")
@login_required
@owner_required
def edit_endpoint(endpoint_id):
    endpoint = _mine(endpoint_id)
    try:
        _, warning = endpoints.update(
            get_db(), g.merchant, endpoint.id, now=now(), allow_loopback=_loopback(),
            url=request.form.get("url", "").strip(), events=_form_events(),
            description=request.form.get("description", "").strip() or None)
    except endpoints.EndpointError as e:
        return webhooks_page(error=str(e), status=400)
    return pages.done("dashboard.webhooks_page", "endpoint-saved", warning=warning)


@bp.post("/webhooks/endpoints/<endpoint_id>/<action>")
@login_required
@owner_required
def endpoint_action(endpoint_id, action):
    endpoint = _mine(endpoint_id)
    db, current = get_db(), now()
    if action in ("disable", "enable"):
        endpoints.update(db, g.merchant, endpoint.id, now=current, enabled=action == "enable")
        return pages.done("dashboard.webhooks_page", f"endpoint-{action}d")
    if action == "delete":
        endpoints.delete(db, g.merchant.id, endpoint.id, current)
        return pages.done("dashboard.webhooks_page", "endpoint-deleted")
    if action == "roll-secret":
        overlap = merchants.roll_overlap_seconds(current_app.config)
        secret = endpoints.roll_secret(db, g.merchant.id, endpoint.id, current, overlap)
        until = f"until {when(current + overlap)}" if overlap else "no longer"
        return _secret_shown(f"New signing secret: {_name(endpoint)}", secret,
                             "Put it in this endpoint's receiver now: it is shown this once."
                             f" Deliveries carry a signature with the previous secret too {until}.")
    if action == "test":
        return _send_test(endpoint)
    raise not_found()


def _send_test(endpoint):
    """Queued for the delivery worker, never sent from here: no page waits on an endpoint."""
    if endpoint is None:
        return webhooks_page(error="No webhook URL is set: set one first.", status=409)
    if not endpoint.enabled:
        return webhooks_page(error="This endpoint is disabled: enable it first.", status=409)
    try:
        outbox.queue_test(get_db(), g.merchant, endpoint, now())
    except outbox.TestEventWaiting as e:
        return webhooks_page(error=str(e), status=409)
    return pages.done("dashboard.webhooks_page", "test")


@bp.post("/webhooks/url")
@login_required
@owner_required
def set_webhook_url():
    """The first endpoint's URL (made if there is none; emptied: it is disabled)."""
    url = request.form.get("url", "").strip()
    try:
        _, warning = merchants.set_webhook_url(get_db(), g.merchant.id, url or None, now(),
                                               allow_loopback=_loopback())
    except merchants.MerchantError as e:
        return webhooks_page(error=str(e), status=400)
    return pages.done("dashboard.webhooks_page", "url-set" if url else "url-removed",
                      **({"warning": warning} if warning else {}))


@bp.post("/webhooks/test")
@login_required
@owner_required
def send_test_event():
    """A test event to the first endpoint (the URL form's: emptied, it is disabled)."""
    first = endpoints.first(get_db(), g.merchant.id)
    return _send_test(first if first is not None and first.enabled else None)


@bp.post("/webhooks/replay-failed")
@login_required
@owner_required
def replay_failed():
    replayed = outbox.replay_where(get_db(), now(), statuses=["failed"], merchant_id=g.merchant.id)
    return pages.done("dashboard.webhooks_page", "replayed", count=len(replayed))
