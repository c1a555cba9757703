"""`flask --app app events ...`: webhook events, their deliveries and attempts, replay."""
from datetime import UTC, datetime

import click
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import outbox as service

events = AppGroup("events", help="Inspect webhook events and their deliveries; replay them.")


@events.command("list")
@click.option("--status", type=click.Choice(tuple(service.DELIVERY_STATES)), default=None,
              help="Only events with a delivery in this state (no_endpoint: with none).")
@click.option("--merchant", "merchant_id", default=None, help="Only this merchant's events.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
def list_(status, merchant_id, limit):
    """List events, newest first, each with the state of its deliveries."""
    items = service.list_recent(get_db(), limit=limit, state=status, merchant_id=merchant_id)
    table(
        [(e.id, e.type, e.status, e.attempts, _next(e), len(e.deliveries), e.merchant_id,
          e.process_id or "-", when(e.created_at)) for e in items],
        ("EVENT ID", "TYPE", "STATUS", "ATTEMPTS", "NEXT", "ENDPOINTS", "MERCHANT", "PROCESS",
         "CREATED"),
    )


def _next(item):
    """When an event or a delivery is next attempted, or when it was delivered."""
    if item.status == "delivered":
        return "delivered " + when(item.delivered_at)
    return when(item.next_attempt_at)


@events.command("show")
@click.argument("event_id")
def show(event_id):
    """Show an event: its body exactly as sent, and its delivery to each endpoint with the
    attempts."""
    try:
        event, attempts = service.get_with_attempts(get_db(), event_id)
    except service.EventNotFound:
        raise fail(f"No event {event_id}.") from None
    click.echo(f"event:     {event.id}")
    click.echo(f"type:      {event.type}")
    click.echo(f"status:    {event.status}")
    click.echo(f"merchant:  {event.merchant_id}")
    click.echo(f"process:   {event.process_id or '- (a test event)'}")
    click.echo(f"created:   {when(event.created_at)}")
    click.echo("payload:")
    click.echo(event.payload)
    if not event.deliveries:
        click.echo("deliveries: none"
                   " (no endpoint was enabled and subscribed to it when it was made)")
    for d in event.deliveries:
        state = "retrying" if d.retrying else d.status
        click.echo(f"delivery to {d.endpoint_id}: {state}, {d.attempts} attempt(s) since the last"
                   f" replay, next: {_next(d)}" + (f", last error: {d.last_error}" if d.last_error
                                                   else ""))
        mine = [a for a in attempts if a.endpoint_id == d.endpoint_id]
        if mine:
            table(
                [(i, when(a.attempted_at), a.status_code if a.status_code is not None else "-",
                  a.error or "ok", f"{a.duration_ms} ms", a.url or "-")
                 for i, a in enumerate(mine, 1)],
                ("#", "TIME", "STATUS", "RESULT", "DURATION", "URL"),
            )


def _iso(ctx, param, value):
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter("not an ISO 8601 time, e.g. 2026-11-22T10:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


@events.command("replay")
@click.argument("event_id", required=False)
@click.option("--endpoint", "endpoint_id", default=None,
              help="With EVENT_ID: only its delivery to this endpoint"
                   " (made if it never went there).")
@click.option("--failed", is_flag=True, help="Every `failed` delivery.")
@click.option("--cancelled", is_flag=True, help="Every `cancelled` delivery.")
@click.option("--no-endpoint", is_flag=True,
              help="Every event that went to no endpoint, to the endpoints that want it now.")
@click.option("--merchant", "merchant_id", default=None,
              help="With --failed/--cancelled/--no-endpoint: only this merchant's.")
@click.option("--since", callback=_iso, default=None,
              help="With --failed/--cancelled/--no-endpoint: only events created at or after this"
                   " ISO time (UTC if no offset).")
def replay(event_id, endpoint_id, failed, cancelled, no_endpoint, merchant_id, since):
    """Re-queue EVENT_ID (its failed and cancelled deliveries, or when none is, every one), or
    every delivery in a state, for an attempt now.

    The attempt history is kept; the attempt count restarts at 0, so the whole retry schedule
    applies again."""
    statuses = [s for s, wanted in (("failed", failed), ("cancelled", cancelled),
                                    ("no_endpoint", no_endpoint)) if wanted]
    if bool(event_id) == bool(statuses):
        raise click.UsageError("Give either EVENT_ID or --failed/--cancelled/--no-endpoint.")
    if event_id and (merchant_id or since is not None):
        raise click.UsageError("--merchant and --since go with --failed/--cancelled/--no-endpoint.")
    if endpoint_id and not event_id:
        raise click.UsageError("--endpoint goes with EVENT_ID.")
    db = get_db()
    if event_id:
        try:
            service.replay(db, event_id, now(), endpoint_id=endpoint_id)
        except service.EventNotFound:
            raise fail(f"No event {event_id}.") from None
        except service.NotReplayed as e:
            raise fail(e) from None
        click.echo(f"Re-queued {event_id} for delivery now.")
        return
    ids = service.replay_where(db, now(), statuses=statuses, merchant_id=merchant_id, since=since)
    click.echo(f"Re-queued {len(ids)} event{'s' if len(ids) != 1 else ''} for delivery now.")
    for replayed in ids:
        click.echo(f"  {replayed}")
