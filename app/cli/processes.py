"""`flask --app app processes ...`: look at processes, complete one by hand."""
import click
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.core.jsonutil import dumps_pretty, loads
from app.core.records import STATUSES
from app.db import get_db
from app.domain import outbox, payments, refunds
from app.domain import processes as service
from app.domain.representation import process_json
from app.web.http import parse_process_id

processes = AppGroup("processes", help="Inspect payment processes; complete one by hand.")


def _process_id(value):
    process_id = parse_process_id(value)
    if process_id is None:
        raise click.BadParameter("not a process id (UUID)", param_hint="PROCESS_ID")
    return process_id


@processes.command("list")
@click.option("--merchant", "merchant_id", default=None, help="Only this merchant's processes.")
@click.option("--status", type=click.Choice(STATUSES), default=None)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
def list_(merchant_id, status, limit):
    """List processes, newest first."""
    current = now()
    items, has_more = service.page(get_db(), merchant_id, now=current, limit=limit, status=status)
    table(
        [
            (p.id, p.merchant_id, p.effective_status(current), p.amount,
             "live" if p.livemode else "test", when(p.created_at), when(p.expires_at))
            for p in items
        ],
        ("PROCESS ID", "MERCHANT", "STATUS", "AMOUNT", "MODE", "CREATED", "EXPIRES"),
    )
    if has_more:
        click.echo(f"(more than {limit}; use --limit)")


@processes.command("show")
@click.argument("process_id")
def show(process_id):
    """Show one process (with its metadata) and its webhook events."""
    db = get_db()
    try:
        process = service.get(db, None, _process_id(process_id))
    except service.ProcessNotFound:
        raise fail(f"No process {process_id}.") from None
    payment = payments.view(db, process)
    its_refunds = refunds.of_processes(db, [process]).get(process.id, ())
    click.echo(dumps_pretty(loads(
        process_json(process, now(), payment, its_refunds).encode("utf-8"))))
    its_events = outbox.for_process(db, process.id)
    click.echo(f"merchant: {process.merchant_id}")
    click.echo(f"events: {len(its_events)}")
    for e in its_events:
        click.echo(f"  {e.id}  {e.type:<18} {e.status:<11} attempts={e.attempts}"
                   f"  {when(e.created_at)}")


@processes.command("complete")
@click.argument("process_id")
def complete(process_id):
    """Mark a pending process completed (a payment confirmed outside the button)."""
    try:
        process = service.complete(get_db(), _process_id(process_id), now())
    except service.ProcessNotFound:
        raise fail(f"No process {process_id}.") from None
    except service.InvalidState as e:
        raise fail(e) from None
    click.echo(f"Completed process {process.id}; payment.completed event written.")
