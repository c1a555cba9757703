"""`flask --app app watch-payments`: the chain watcher (see app/chain/watcher/)."""
import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from app.chain.watcher import MAX_ADDRESSES, MAX_RANGE, Watcher
from app.cli.common import fail, stop_on_signals
from app.data import payments as payment_rows
from app.db import get_db


@click.command("watch-payments")
@click.option("--once", is_flag=True,
              help="Catch every enabled network up to its head once, then exit (for cron); exit "
                   "status 1 when a network's node could not be read.")
@click.option("--poll-interval", type=click.FloatRange(0.05, 3600), default=5.0, show_default=True,
              help="Seconds between polls of a network"
                   " (a failing one backs off up to --backoff-max).")
@click.option("--backoff-max", type=click.FloatRange(0.1, 3600), default=60.0, show_default=True,
              help="Longest wait, in seconds, before polling a failing node again.")
@click.option("--max-range", type=click.IntRange(1, 100_000), default=MAX_RANGE, show_default=True,
              help="Most blocks per eth_getLogs call (a range the node refuses is split).")
@click.option("--max-addresses", type=click.IntRange(1, 10_000), default=MAX_ADDRESSES,
              show_default=True, help="Most deposit addresses per eth_getLogs call.")
@click.option("--network", "network_ids", multiple=True, metavar="ID",
              help="Watch this network only (repeat for several; default: every enabled network)."
                   " Each network is polled in a thread of its own either way.")
@with_appcontext
def watch_payments(once, poll_interval, backoff_max, max_range, max_addresses, network_ids):
    """Watch the enabled networks for payments until stopped, each network polled on its own
    (SIGTERM/Ctrl-C: each network's step under way commits, then exit 0; a second signal a second
    later exits at once). Several may run, on any hosts: one polls each network, the others stand
    by and take over within two poll intervals plus WATCHER_LEASE_SECONDS (docs/storage.md)."""
    unknown = sorted(set(network_ids) - {n.id for n in payment_rows.list_networks(
        get_db().connection())}) if network_ids else []
    if unknown:
        raise fail(f"No network {', '.join(unknown)} (see: networks list).")
    watcher = Watcher.from_app(current_app._get_current_object(), poll_interval=poll_interval,
                               backoff_max=backoff_max, max_range=max_range,
                               max_addresses=max_addresses, networks=network_ids)
    with stop_on_signals(watcher.stop), watcher:
        if once:
            if not watcher.run_once():
                sys.exit(1)
        else:
            watcher.run()
