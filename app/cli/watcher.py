"""`flask --app app watch-payments`: the chain watcher (see app/chain/watcher.py)."""
import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from app.chain.watcher import MAX_ADDRESSES, MAX_RANGE, Watcher
from app.cli.common import stop_on_signals


@click.command("watch-payments")
@click.option("--once", is_flag=True,
              help="Catch every enabled network up to its head once, then exit (for cron); exit "
                   "status 1 when a network's node could not be read.")
@click.option("--poll-interval", type=click.FloatRange(0.05, 3600), default=5.0, show_default=True,
              help="Seconds between polls of a network (a failing one backs off up to --backoff-max).")
@click.option("--backoff-max", type=click.FloatRange(0.1, 3600), default=60.0, show_default=True,
              help="Longest wait, in seconds, before polling a failing node again.")
@click.option("--max-range", type=click.IntRange(1, 100_000), default=MAX_RANGE, show_default=True,
              help="Most blocks per eth_getLogs call (a range the node refuses is split).")
@click.option("--max-addresses", type=click.IntRange(1, 10_000), default=MAX_ADDRESSES,
              show_default=True, help="Most deposit addresses per eth_getLogs call.")
@with_appcontext
def watch_payments(once, poll_interval, backoff_max, max_range, max_addresses):
    """Watch the enabled networks for payments until stopped (SIGTERM/Ctrl-C: the current step
    commits, then exit 0; a second signal a second later exits at once)."""
    watcher = Watcher.from_app(current_app._get_current_object(), poll_interval=poll_interval,
                               backoff_max=backoff_max, max_range=max_range,
                               max_addresses=max_addresses)
    with stop_on_signals(watcher.stop), watcher:
        if once:
            if not watcher.run_once():
                sys.exit(1)
        else:
            watcher.run()
