"""`flask --app app reconcile NETWORK_ID`: the books checked against the chain
(app/chain/reconcile.py). Exit status 0 when the three lists are empty, 1 otherwise (or when it
cannot read the node)."""
import json

import click
from flask import current_app
from flask.cli import with_appcontext

from app.chain import reconcile as books
from app.cli.common import fail
from app.db import get_db
from app.domain.setup import SetupError
from app.evm import rpc

TITLES = (("not_on_chain", "recordedNotOnChain", "Recorded but not on the chain"),
          ("not_recorded", "onChainNotRecorded", "On the chain but not recorded"),
          ("unsupported", "unsupportedStates", "States the records do not support"))


@click.command("reconcile")
@click.argument("network_id")
@click.option("--from-block", type=click.IntRange(0), default=None,
              help="First block to read (default: the first stamped when the first deposit"
                   " address of the network's mode was handed out, or the start block).")
@click.option("--to-block", type=click.IntRange(0), default=None,
              help="Last block to read (default: the highest the watcher has read that is final).")
@click.option("--max-range", type=click.IntRange(1), default=None,
              help="Blocks per eth_getLogs at most (default: the whole range, halved where the"
                   " node refuses it).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@with_appcontext
def reconcile(network_id, from_block, to_block, max_range, as_json):
    """Compare the network's records with the chain: what is recorded but not on it, what is on it
    but not recorded, and states the records do not support. Changes nothing."""
    try:
        report = books.reconcile(
            get_db(), network_id, from_block=from_block, to_block=to_block, max_range=max_range,
            client_factory=lambda url: rpc.Client.from_config(url, current_app.config))
    except SetupError as e:  # "No network x." names the database it looked in (a demo has its own)
        raise fail(e) from None
    except rpc.RpcError as e:
        raise click.ClickException(f"The node did not answer as expected, nothing is concluded:"
                                   f" {e}") from None
    if as_json:
        click.echo(json.dumps({
            "networkId": report.network_id, "chainId": report.chain_id,
            "fromBlock": report.from_block, "toBlock": report.to_block,
            **{key: [f.as_json() for f in getattr(report, name)] for name, key, _ in TITLES},
            "checked": report.checked, "seconds": report.seconds}))
    else:
        _print(report)
    if not report.clean:
        raise SystemExit(1)


def _print(report):
    c = report.checked
    click.echo(f"Network {report.network_id} (chain id {report.chain_id}), blocks"
               f" {report.from_block}-{report.to_block}: {c['transfersOnChain']} transfers to"
               f" deposit addresses on the chain, {c['transfersRecorded']} recorded;"
               f" {c['refunds']} refunds, {c['collections']} collections,"
               f" {c['completedProcesses']} completed processes,"
               f" {c['payoutAddresses']} payout-mode addresses' gas coin.")
    for name, _, title in TITLES:
        found = getattr(report, name)
        click.echo(f"{title}: {len(found) or 'none'}")
        for f in found:
            click.echo(f"  - {_line(f)}")
    click.echo("The books match the chain." if report.clean
               else "The books do not match the chain.")


def _line(f) -> str:
    who = ", ".join(part for part in (
        f.process_id and f"process {f.process_id}", f.refund_id and f"refund {f.refund_id}",
        f.collection_id is not None and f"collection {f.collection_id}") if part)
    where = f.tx_hash or ""
    if f.tx_hash and f.log_index is not None:
        where += f":{f.log_index}"
    if f.block_number is not None:
        where += f" in block {f.block_number}"
    what = f"{f.amount} base units of {f.token}" if f.amount is not None and f.token else ""
    if f.address:
        what += f" at {f.address}" if what else f"at {f.address}"
    parts = [f"{f.kind} ({who})" if who else f.kind, where, what]
    return ", ".join(p for p in parts if p) + f": {f.reason}"
