"""`flask --app app rates ...`: exchange rates between a process's currency and a token's peg, from
a price feed read through a network's node or set by hand (docs/payments.md, "Prices in the
merchant's currency")."""
import json

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import rates as service
from app.evm.rpc import Client

rates = AppGroup("rates", help="Exchange rates: PAIR is BASE/QUOTE, the price of one BASE in QUOTE"
                               " (EUR/USD 1.0842: one euro is 1.0842 dollars).")


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except service.RateError as e:
        raise fail(e) from None


def _rate_json(rate, state, why, current):
    return {"pair": rate.pair, "source": rate.source, "networkId": rate.network_id,
            "feed": rate.feed, "sequencerFeed": rate.sequencer_feed, "value": rate.value,
            "round": rate.round_id,
            "updatedAt": None if rate.updated_at is None else when(rate.updated_at),
            "age": None if rate.updated_at is None else current - rate.updated_at,
            "maxAge": rate.max_age, "maxDepeg": rate.max_depeg, "state": state, "why": why}


def _age(seconds):
    return "-" if seconds is None else f"{seconds} s"


@rates.command("add")
@click.argument("pair")
@click.option("--network", "network_id", required=True,
              help="The network whose node reads the feed.")
@click.option("--feed", required=True, help="The price feed's contract (AggregatorV3Interface).")
@click.option("--max-age", type=click.IntRange(1), default=service.FEED_MAX_AGE, show_default=True,
              metavar="SECONDS", help="An older answer does not count: the feed's heartbeat and a"
                                      " margin (a USDC/USD feed's is a day, a EUR/USD one's may be"
                                      " an hour).")
@click.option("--sequencer-feed", default=None,
              help="An L2 network's sequencer uptime feed: its rates count only while the sequencer"
                   f" has been up for {service.SEQUENCER_GRACE} s.")
@click.option("--max-depeg", default=service.MAX_DEPEG, show_default=True, metavar="PERCENT",
              help="For a peg guard (SYMBOL/PEG, e.g. USDC/USD): the asset is quoted only while the"
                   " feed is within PERCENT of 1.")
@click.option("--json", "as_json", is_flag=True, help="Print the rate as JSON.")
def rates_add(pair, network_id, feed, max_age, sequencer_feed, max_depeg, as_json):
    """Make a price feed PAIR's source (replacing any other). The feed is read through the
    network's node now: it must answer, name the pair in its description and count."""
    current = int(now())
    rate = _run(service.add_feed, pair, network_id=network_id, feed=feed, now=current,
                max_age=max_age, sequencer_feed=sequencer_feed, max_depeg=max_depeg,
                client_factory=lambda url: Client.from_config(url, current_app.config))
    if as_json:
        click.echo(json.dumps(_rate_json(rate, "ok", None, current)))
        return
    click.echo(f"{rate.pair}: feed {rate.feed} on {network_id}, {rate.value} in round"
               f" {rate.round_id} (updated {when(rate.updated_at)}). The chain watcher reads it on"
               f" each poll; an answer older than {rate.max_age} s does not count.")


@rates.command("set")
@click.argument("pair")
@click.argument("value")
@click.option("--max-age", type=click.IntRange(1), default=service.MANUAL_MAX_AGE,
              show_default=True, metavar="SECONDS", help="It counts this long from now.")
@click.option("--max-depeg", default=service.MAX_DEPEG, show_default=True, metavar="PERCENT",
              help="For a peg guard (SYMBOL/PEG): the asset is quoted only within PERCENT of 1.")
@click.option("--json", "as_json", is_flag=True, help="Print the rate as JSON.")
def rates_set(pair, value, max_age, max_depeg, as_json):
    """Make VALUE, from your own source, PAIR's rate (replacing any other) for --max-age seconds."""
    current = int(now())
    rate = _run(service.set_manual, pair, value, now=current, max_age=max_age, max_depeg=max_depeg)
    if as_json:
        click.echo(json.dumps(_rate_json(rate, "ok", None, current)))
        return
    click.echo(f"{rate.pair}: {rate.value} (manual), counting until"
               f" {when(rate.updated_at + rate.max_age)}.")


@rates.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def rates_list(as_json):
    """Every pair: its source, last value and round, its age, and whether it counts (ok, stale,
    invalid) and why not."""
    current = int(now())
    found = _run(service.listing, current)
    if as_json:
        click.echo(json.dumps([_rate_json(r, state, why, current) for r, state, why in found]))
        return
    table([(r.pair, r.source if r.source == "manual" else f"feed on {r.network_id}",
            r.value or "-", r.round_id or "-", when(r.updated_at),
            _age(None if r.updated_at is None else current - r.updated_at), state, why or "")
           for r, state, why in found],
          ("PAIR", "SOURCE", "VALUE", "ROUND", "UPDATED", "AGE", "STATE", "WHY"))


@rates.command("remove")
@click.argument("pair")
def rates_remove(pair):
    """Remove PAIR's rate: processes that need it can no longer be paid in those assets (those
    already quoted keep their quote)."""
    _run(service.remove, pair)
    click.echo(f"Removed the rate for {pair}.")
