"""`flask --app app prune` and `flask --app app backup-db PATH`: retention and online backups."""
import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.common import fail
from app.clock import now
from app.db import get_db
from app.domain import ops


@click.command("prune")
@click.option("--older-than", "days", type=click.IntRange(1, None), default=None,
              help="Age in days of the final events removed. Default: RETENTION_DAYS (90).")
@with_appcontext
def prune(days):
    """Remove delivered, failed and no-endpoint webhook events older than the retention age, with
    their delivery attempts, and expired Idempotency-Key records. Never a pending event, never a
    process."""
    config = current_app.config
    days = days or config["RETENTION_DAYS"]
    if not days:
        raise fail("RETENTION_DAYS is 0 (keep for ever): give --older-than DAYS.")
    pruned = ops.prune(get_db(), now(), older_than_days=days,
                              idempotency_ttl=config["IDEMPOTENCY_TTL_SECONDS"])
    click.echo(f"Pruned {pruned.events} events older than {days} days, {pruned.attempts} delivery"
               f" attempts, {pruned.idempotency_keys} expired idempotency keys.")


@click.command("backup-db")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@with_appcontext
def backup_db(path, force):
    """Copy the database to PATH while the service runs (SQLite's online backup: one consistent
    snapshot, checked). Restore: docs/operations.md. On PostgreSQL: pg_dump (docs/storage.md)."""
    if get_db().dialect != "sqlite":
        raise fail(
            "backup-db copies a SQLite file; back up PostgreSQL with pg_dump"
            " (docs/storage.md, \"Backups on PostgreSQL\").")
    try:
        size = ops.backup(current_app.config["DATABASE"], path, overwrite=force)
    except ops.BackupError as e:
        raise fail(e) from None
    click.echo(f"Backed up the database to {path} ({size} bytes, integrity ok).")
