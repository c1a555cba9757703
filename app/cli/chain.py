"""`flask --app app networks ...` and `assets ...`: what customers may pay with, on which chains.

RPC URLs may hold a provider's API key: they are printed as scheme and host only.
"""
import json

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import health, rates
from app.domain import setup as service
from app.evm.rpc import Client, redacted
from app.evm.signer import gwei

networks = AppGroup("networks", help="EVM networks customers may pay on.")
assets = AppGroup("assets", help="Tokens customers may pay with.")


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except service.SetupError as e:
        raise fail(e) from None


def _add(action, as_json, to_json, describe, **fields):
    """Create a row through the service (a SetupError is a usage error) and print it: as JSON with
    --json, else as one sentence."""
    row = _run(action, now=now(), **fields)
    click.echo(json.dumps(to_json(row)) if as_json else describe(row))


def _print_rows(rows, as_json, to_json, cells, headings):
    """A list command's output: a JSON array with --json, else a table."""
    if as_json:
        click.echo(json.dumps([to_json(row) for row in rows]))
    else:
        table([cells(row) for row in rows], headings)


def _health(n):
    return health.of(n, int(now()), current_app.config["NETWORK_STALE_SECONDS"])


def _network_json(n):
    state = _health(n)
    return {"id": n.id, "name": n.name, "chainId": n.chain_id, "testnet": n.is_test,
            "rpcUrl": redacted(n.rpc_url), "confirmations": n.confirmations,
            "finality": n.finality, "maxBlockAge": n.max_block_age,
            "maxFeeGwei": None if n.max_fee_per_gas is None else gwei(n.max_fee_per_gas),
            "startBlock": n.start_block,
            "scannedBlock": n.scanned_block, "headBlock": n.head_block,
            "enabled": n.disabled_at is None, "state": state.state, "stateSince": when(state.since),
            "createdAt": when(n.created_at)}


def _health_text(n):
    state = _health(n)
    return "ok" if state.ok else f"unavailable since {when(state.since)}"


def _finality_text(n):
    if n.finality == "confirmations":
        return f"{n.confirmations} confirmations"
    return f"settles at the node's \"{n.finality}\" block"


def _asset_json(a):
    return {"id": a.id, "networkId": a.network_id, "symbol": a.symbol, "name": a.name,
            "contract": a.contract, "decimals": a.decimals, "enabled": a.disabled_at is None,
            "createdAt": when(a.created_at),
            "eip3009": ({"name": a.eip3009_name, "version": a.eip3009_version}
                        if a.eip3009 else None),
            "peg": a.peg}


@networks.command("add")
@click.argument("network_id")
@click.option("--name", required=True, help="Shown to customers, e.g. 'Polygon PoS'.")
@click.option("--chain-id", required=True, type=int, help="The EIP-155 chain id.")
@click.option("--rpc-url", required=True, help="The node's JSON-RPC URL (http or https).")
@click.option("--confirmations", default=12, show_default=True, type=int,
              help="Blocks (the transfer's own included) before a transfer counts.")
@click.option("--finality", type=click.Choice(service.FINALITY_MODES), default="confirmations",
              show_default=True,
              help="When a transfer counts: after --confirmations blocks, or once the node's"
                   " 'safe' or 'finalized' block is at or past it (the node must serve that tag).")
@click.option("--max-block-age", type=click.IntRange(1), default=None, metavar="SECONDS",
              help="The network is unavailable while its head block is older than this (default:"
                   " off; a development chain mines only on demand).")
@click.option("--max-fee-gwei", default=None, metavar="GWEI",
              help="Nothing the service sends on it (the relayer's payments, collect, the"
                   " factory's deployment) pays more than this per gas (default: no ceiling).")
@click.option("--start-block", type=int, default=None,
              help="First block to read (default: the block after the node's head now).")
@click.option("--testnet", is_flag=True,
              help="A test network: offered to test-mode merchants only (a well-known test chain id"
                   " is one without the flag).")
@click.option("--json", "as_json", is_flag=True, help="Print the created network as JSON.")
def networks_add(network_id, name, chain_id, rpc_url, confirmations, finality, max_block_age,
                 max_fee_gwei, start_block, testnet, as_json):
    """Enable a network. The node is asked for its chain id (which must be --chain-id) and, without
    --start-block, its head. Test networks are offered to test-mode merchants only, live networks
    to live merchants only."""
    _add(service.add_network, as_json, _network_json,
         lambda n: f"Added {'test' if n.is_test else 'live'} network {n.id} ({n.name}, chain id"
                   f" {n.chain_id}) via"
                   f" {redacted(n.rpc_url)}; {_finality_text(n)}; reading from block"
                   f" {n.start_block}.",
         network_id=network_id, name=name, chain_id=chain_id, rpc_url=rpc_url,
         confirmations=confirmations, start_block=start_block, testnet=testnet,
         finality=finality, max_block_age=max_block_age,
         max_fee_per_gas=None if max_fee_gwei is None else _max_fee(max_fee_gwei),
         client_factory=_client)


def _max_fee(gwei_text):
    try:
        return service.max_fee_wei(gwei_text)
    except service.SetupError as e:
        raise click.ClickException(str(e)) from None


def _client(url):
    return Client.from_config(url, current_app.config)


@networks.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def networks_list(as_json):
    """List networks with the chain watcher's position on each."""
    _print_rows(
        _run(service.list_networks), as_json, _network_json,
        lambda n: (n.id, n.name, n.chain_id, "test" if n.is_test else "live", redacted(n.rpc_url),
                   n.confirmations, n.finality, n.scanned_block, n.head_block,
                   "disabled " + when(n.disabled_at) if n.disabled_at else "enabled",
                   "-" if n.disabled_at else _health_text(n)),
        ("ID", "NAME", "CHAIN ID", "MODE", "RPC", "CONFIRMATIONS", "FINALITY", "SCANNED", "HEAD",
         "STATE", "HEALTH"),
    )


@networks.command("disable")
@click.argument("network_id")
def networks_disable(network_id):
    """Stop offering a network to customers (payments already confirmed on it keep their choice)."""
    _run(service.disable_network, network_id, now())
    click.echo(f"Disabled network {network_id}: customers can no longer choose it.")


@networks.command("set-mode")
@click.argument("network_id")
@click.argument("mode", type=click.Choice(["test", "live"]))
def networks_set_mode(network_id, mode):
    """Make a network a test network (test-mode merchants only) or a live one (live merchants
    only). A well-known test chain id stays test."""
    network, stranded = _run(service.set_network_mode, network_id, mode)
    click.echo(f"Network {network.id} (chain id {network.chain_id}) is a {mode} network: offered"
               f" to {mode}-mode merchants only.")
    if stranded:
        other = "live" if mode == "test" else "test"
        click.echo(f"Warning: {stranded} pending {other}-mode processes chose it: their payments on"
                   " it are no longer credited.")


@networks.command("set-finality")
@click.argument("network_id")
@click.argument("mode", type=click.Choice(service.FINALITY_MODES))
def networks_set_finality(network_id, mode):
    """When a transfer on the network counts, from the watcher's next poll on: after the
    network's confirmations, or once the node's 'safe' or 'finalized' block is at or past its
    block. The node must serve that tag now."""
    network = _run(service.set_finality, network_id, mode, client_factory=_client)
    click.echo(f"Network {network.id}: a transfer counts {_counts_when(network)}.")


def _counts_when(n):
    if n.finality == "confirmations":
        return f"after {n.confirmations} confirmations"
    return f"once the node's \"{n.finality}\" block is at or past its block"


@networks.command("set-max-block-age")
@click.argument("network_id")
@click.argument("seconds", type=click.IntRange(0))
def networks_set_max_block_age(network_id, seconds):
    """The network is unavailable (hidden from customers, confirm answers 503) while its head block
    is older than SECONDS; 0 turns the check off."""
    network = _run(service.set_max_block_age, network_id, seconds or None)
    if network.max_block_age is None:
        click.echo(f"Network {network.id}: the head block's age is not checked.")
    else:
        click.echo(f"Network {network.id} is unavailable while its head block is older than"
                   f" {network.max_block_age} s.")


@networks.command("set-max-fee")
@click.argument("network_id")
@click.argument("gwei_text", metavar="GWEI")
def networks_set_max_fee(network_id, gwei_text):
    """The most a transaction the service sends on the network may pay per gas (maxFeePerGas), in
    gwei (e.g. 50, or 0.05 on an L2); 0 turns the ceiling off. Above it the relayer stops offering
    payments without gas and collect stops, sending nothing."""
    network = _run(service.set_max_fee, network_id, _max_fee(gwei_text))
    if network.max_fee_per_gas is None:
        click.echo(f"Network {network.id}: no ceiling on the fees it pays.")
    else:
        click.echo(f"Network {network.id}: nothing is sent paying more than"
                   f" {gwei(network.max_fee_per_gas)} gwei per gas.")


@assets.command("add")
@click.argument("asset_id")
@click.option("--network", "network_id", required=True, help="The network's id.")
@click.option("--symbol", required=True, help="E.g. USDC: the contract's own symbol().")
@click.option("--name", required=True, help="E.g. 'USD Coin'.")
@click.option("--contract", required=True, help="The ERC-20 contract address (0x…).")
@click.option("--decimals", required=True, type=int,
              help="The token's decimals (USDC: 6): the contract's own decimals().")
@click.option("--eip3009", is_flag=True,
              help="The token implements ERC-3009 (transferWithAuthorization, as USDC and EURC do):"
                   " payers without the network's gas coin may pay through the relayer"
                   " (RELAYER_KEY_FILE). Its EIP-712 domain is read from the contract and checked.")
@click.option("--skip-contract-check", is_flag=True,
              help="Do not ask the network's node for the contract's decimals() and symbol() (it"
                   " cannot be reached now): you vouch that CONTRACT is this network's token with"
                   " these decimals and this symbol. Wrong decimals make every order due a"
                   " fraction or a multiple of its amount.")
@click.option("--peg", default="USD", show_default=True,
              help="The currency one token is worth (ISO 4217; EURC: EUR). A process in another"
                   " currency is paid at a rate (`rates`).")
@click.option("--json", "as_json", is_flag=True, help="Print the created asset as JSON.")
def assets_add(asset_id, network_id, symbol, name, contract, decimals, eip3009,
               skip_contract_check, peg, as_json):
    """Let customers pay with a token on a network. The contract's decimals() and symbol() are read
    through the network's node and must be --decimals and --symbol."""
    def describe(a):
        text = (f"Added asset {a.id} ({a.symbol}, {a.decimals} decimals, pegged to {a.peg}) on"
                f" {a.network_id}:"
                f" contract {a.contract}")
        text += (" (not checked: you vouch for its decimals and symbol)." if skip_contract_check
                 else ", its decimals() and symbol() checked.")
        if a.eip3009:
            text += (f" Payable without gas (ERC-3009, EIP-712 domain {a.eip3009_name!r} version"
                     f" {a.eip3009_version!r}) when RELAYER_KEY_FILE is set.")
        return text

    _add(service.add_asset, as_json, _asset_json, describe, asset_id=asset_id,
         network_id=network_id, symbol=symbol, name=name, contract=contract, decimals=decimals,
         eip3009=eip3009, check_contract=not skip_contract_check, client_factory=_client, peg=peg)


@assets.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def assets_list(as_json):
    """List assets."""
    _print_rows(
        _run(service.list_assets), as_json, _asset_json,
        lambda a: (a.id, a.network_id, a.symbol, a.name, a.contract, a.decimals, a.peg,
                   "disabled" if a.disabled_at else "enabled"),
        ("ID", "NETWORK", "SYMBOL", "NAME", "CONTRACT", "DECIMALS", "PEG", "STATE"),
    )


@assets.command("set-peg")
@click.argument("asset_id")
@click.argument("currency")
@click.option("--network", "network_id", default=None,
              help="Only on this network (default: on every network the asset is on).")
def assets_set_peg(asset_id, currency, network_id):
    """Peg ASSET_ID to CURRENCY (ISO 4217): what one token is worth. Payments confirmed from now on
    are quoted by it; those already confirmed keep their quote."""
    try:
        changed = rates.set_peg(get_db(), asset_id, currency, network_id)
    except rates.RateError as e:
        raise fail(e) from None
    click.echo(f"Asset {asset_id} is pegged to {currency} ({changed} network"
               f"{'s' if changed != 1 else ''}).")
