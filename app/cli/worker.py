"""`flask --app app deliver-webhooks`: the delivery worker (see app/worker.py)."""
import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.common import stop_on_signals
from app.worker import POLL_MIN_SECONDS, Worker


@click.command("deliver-webhooks")
@click.option("--once", is_flag=True,
              help="Deliver what is due, sweep expired processes, then exit (for cron).")
@click.option("--batch-size", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="Most events claimed per poll (free threads, plus a batch queued behind them "
                   "while attempts are fast).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Attempts in flight at once (threads); a free one claims the next due event.")
@click.option("--per-endpoint", type=click.IntRange(1, 256), default=None,
              help="Most attempts in flight to an endpoint not proven fast (one of its attempts "
                   "shorter than 0.2 s); its other deliveries wait. Default: half the threads.")
@click.option("--poll-max", type=click.FloatRange(POLL_MIN_SECONDS, 3600), default=1.0,
              show_default=True, help="Longest wait between polls when idle, in seconds.")
@with_appcontext
def deliver_webhooks(once, batch_size, concurrency, per_endpoint, poll_max):
    """Deliver webhook events until stopped (SIGTERM/Ctrl-C: finish attempts in flight, exit)."""
    worker = Worker.from_app(current_app._get_current_object(), batch_size=batch_size,
                             concurrency=concurrency, per_endpoint=per_endpoint, poll_max=poll_max)
    with stop_on_signals(worker.stop), worker:
        worker.run(until_idle=once)

