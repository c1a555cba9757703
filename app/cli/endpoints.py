"""`flask --app app endpoints ...`: a merchant's webhook endpoints (docs/webhooks.md, "Several
endpoints"). The single-URL commands (`merchants set-webhook`, `rotate-webhook-secret`) act on
the first one."""
import json

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import endpoints as service
from app.domain import merchants
from app.domain.representation import endpoint_object

endpoints = AppGroup("endpoints", help="A merchant's webhook endpoints: where its events go.")


def _merchant(merchant_id):
    merchant = merchants.get(get_db(), merchant_id)
    if merchant is None:
        raise fail(f"No merchant {merchant_id}.")
    return merchant


def _endpoint(endpoint_id):
    try:
        return service.get(get_db(), None, endpoint_id)
    except service.EndpointNotFound:
        raise fail(f"No webhook endpoint {endpoint_id}.") from None


def _events(text):
    try:
        return service.parse_events(text.split(","))
    except service.EndpointError as e:
        raise fail(f"--events: {e}") from None


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except (service.EndpointError, service.EndpointLimit) as e:
        raise fail(e) from None
    except service.EndpointNotFound as e:
        raise fail(f"No webhook endpoint {e}.") from None


def _loopback():
    return current_app.config["WEBHOOK_ALLOW_LOOPBACK"]


@endpoints.command("add")
@click.argument("merchant_id")
@click.argument("url")
@click.option("--events", "event_types", default="*", show_default=True,
              help="The event types it gets, comma-separated, or * for every type.")
@click.option("--description", default=None, help="What it is for, shown in lists.")
@click.option("--json", "as_json", is_flag=True, help="Print the Endpoint object with its secret.")
def add(merchant_id, url, event_types, description, as_json):
    """Add a webhook endpoint and print its signing secret (shown this once)."""
    merchant = _merchant(merchant_id)
    endpoint, warning = _run(service.create, merchant, url=url, events=_events(event_types),
                             description=description, now=now(), allow_loopback=_loopback())
    if warning:
        click.echo(f"Warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(endpoint_object(endpoint, endpoint.secret)))
        return
    click.echo(f"Added webhook endpoint {endpoint.id} for {merchant_id}: {endpoint.url}")
    click.echo(f"  events:          {','.join(endpoint.events)}")
    click.echo(f"  signing secret:  {endpoint.secret}  (shown once)")


@endpoints.command("list")
@click.argument("merchant_id")
def list_(merchant_id):
    """List a merchant's webhook endpoints, oldest first (the first is
    `merchants set-webhook`'s)."""
    _merchant(merchant_id)
    table([(e.id, "enabled" if e.enabled else "disabled", ",".join(e.events), e.url,
            e.description or "-", when(e.created_at))
           for e in service.list_of(get_db(), merchant_id)],
          ("ENDPOINT ID", "STATE", "EVENTS", "URL", "DESCRIPTION", "CREATED"))


@endpoints.command("update")
@click.argument("endpoint_id")
@click.option("--url", default=None, help="A new URL, used from the next attempt on.")
@click.option("--events", "event_types", default=None, help="Event types, comma-separated, or *.")
@click.option("--description", default=None, help="A new description ('' removes it).")
def update(endpoint_id, url, event_types, description):
    """Change an endpoint's URL, event types or description."""
    endpoint = _endpoint(endpoint_id)
    fields = {}
    if url is not None:
        fields["url"] = url
    if event_types is not None:
        fields["events"] = _events(event_types)
    if description is not None:
        fields["description"] = description or None
    if not fields:
        raise click.UsageError("Give --url, --events or --description.")
    _set(endpoint, **fields)


def _set(endpoint, **fields):
    merchant = _merchant(endpoint.merchant_id)
    changed, warning = _run(service.update, merchant, endpoint.id, now=now(),
                            allow_loopback=_loopback(), **fields)
    if warning:
        click.echo(f"Warning: {warning}", err=True)
    state = "enabled" if changed.enabled else "disabled"
    click.echo(f"Webhook endpoint {changed.id} ({state}): {changed.url}, events"
               f" {','.join(changed.events)}.")


@endpoints.command("disable")
@click.argument("endpoint_id")
def disable(endpoint_id):
    """Stop delivering to an endpoint; its pending deliveries are cancelled (replay resends)."""
    _set(_endpoint(endpoint_id), enabled=False)


@endpoints.command("enable")
@click.argument("endpoint_id")
def enable(endpoint_id):
    """Deliver to an endpoint again, from the next event on."""
    _set(_endpoint(endpoint_id), enabled=True)


@endpoints.command("roll-secret")
@click.argument("endpoint_id")
@click.option("--overlap-hours", type=click.IntRange(0, 8760), default=None,
              help="How long the old secret keeps signing too (default: KEY_ROLL_OVERLAP_HOURS).")
def roll_secret(endpoint_id, overlap_hours):
    """Replace an endpoint's signing secret; deliveries carry a signature with the old one too until
    the overlap ends."""
    endpoint = _endpoint(endpoint_id)
    overlap = merchants.roll_overlap_seconds(current_app.config, overlap_hours)
    secret = _run(service.roll_secret, endpoint.merchant_id, endpoint.id, now(), overlap)
    click.echo(f"New signing secret of {endpoint.id} (shown once): {secret}")
    if overlap:
        click.echo(f"The old one signs too for {overlap // 3600} hour(s): update the receiver"
                   " before then.")


@endpoints.command("delete")
@click.argument("endpoint_id")
def delete(endpoint_id):
    """Delete an endpoint: its pending deliveries are cancelled, its history is kept."""
    endpoint = _endpoint(endpoint_id)
    _run(service.delete, endpoint.merchant_id, endpoint.id, now())
    click.echo(f"Deleted webhook endpoint {endpoint.id} ({endpoint.url}).")
