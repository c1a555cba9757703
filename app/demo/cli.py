"""`flask --app app demo-merchant`: the test-mode merchant that `make run` sets up for testers;
`flask --app app demo-chain`: the local node of `make demo-onchain`, made ready for on-chain
payments."""
import json
import os
import time
from decimal import Decimal

import click
from flask import current_app
from flask.cli import with_appcontext

from app.clock import now
from app.db import get_db, location
from app.demo.merchant import (
    DEMO_STAFF_EMAIL,
    ensure,
    ensure_link,
    ensure_staff,
    give_secret_key,
    key_works,
)
from app.demo.wallet import DemoWallet
from app.domain import merchants
from app.domain.accounts import AccountError
from app.domain.merchants import MerchantError
from app.evm.rpc import RpcError, redacted

DEMO_EUR_USD = "1.0842"  # the demo's EUR / USD feed: one euro in dollars


@click.command("demo-merchant")
@click.option("--file", "path", default=None,
              help="Where its keys are kept (default: the DEMO_MERCHANT_FILE setting,"
                   " instance/demo-merchant.json).")
@click.option("--webhook-url", default=None,
              help="Webhook URL of the demo merchant, set whether it is new or not"
                   " (make run: its built-in receiver, http://127.0.0.1:5000/demo/webhooks).")
@click.option("--console-login", is_flag=True,
              help=f"Also create the merchant console's owner {DEMO_STAFF_EMAIL} (a random"
                   " password, kept in the keys file) and print the login.")
@click.option("--base-url", default=None,
              help="Where the service is reached (make run: http://127.0.0.1:5000), to print the"
                   " demo's payment link whole and send its customers back to the shop (default:"
                   " the PUBLIC_BASE_URL setting).")
@click.option("--secret-key", default=None,
              help="The demo merchant's new secret key (the one the console's Keys page showed"
                   " after a roll), saved in the keys file for the demo shop once it is checked"
                   " to work.")
@click.option("--json", "as_json", is_flag=True, help="Print the saved keys as JSON.")
@with_appcontext
def create_merchant(path, webhook_url, console_login, base_url, secret_key, as_json):
    """Create the demo test-mode merchant once, save its keys, and print them; and its payment link
    (made once, reused while it takes payments). Each database has its own keys file (by default
    beside the SQLite file)."""
    path = path or current_app.config["DEMO_MERCHANT_FILE"]
    base = (base_url or current_app.config.get("PUBLIC_BASE_URL") or "").rstrip("/")
    try:
        keys, how = ensure(get_db(), path, webhook_url=webhook_url, now=now(),
                           allow_loopback=current_app.config["WEBHOOK_ALLOW_LOOPBACK"],
                           database=database_of(current_app.config),
                           overlap=merchants.roll_overlap_seconds(current_app.config))
        if secret_key is not None:
            keys = give_secret_key(get_db(), path, keys, secret_key, now())
        login = ensure_staff(get_db(), path, keys, now=now(),
                             hash_method=current_app.config["DASHBOARD_PASSWORD_HASH"]) \
            if console_login else None
        link, _ = ensure_link(get_db(), path, keys, now=int(now()),
                              success_url=f"{base}/demo/thanks" if base else None)
    except (MerchantError, AccountError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(dict(keys, paymentLinkId=link.id)))
        return
    if how == "created":
        click.echo(f"Created the demo merchant; its keys are saved in {path} (test mode only).")
    elif how == "recovered":
        click.echo(f"{path} held another database's demo merchant: this database's"
                   f" ({keys['merchantId']}, whose console owner is {DEMO_STAFF_EMAIL}) got a new"
                   " secret key, saved there.")
    else:
        click.echo(f"Demo merchant from {path}:")
    click.echo(f"  merchant id:     {keys['merchantId']}")
    if key_works(get_db(), keys, now()):
        click.echo(f"  secret key:      {keys['secretKey']}")
    else:
        click.echo(f"  secret key:      {keys['secretKey']}  REVOKED: it no longer works (revoked"
                   " or rolled in the console), so the demo shop cannot create preorders. Give it"
                   " the new key: flask --app app demo-merchant --secret-key sk_test_…")
    click.echo(f"  public key:      {keys['publicKey']}")
    click.echo(f"  webhook secret:  {keys['webhookSecret']}")
    if webhook_url is not None:
        click.echo(f"  webhook URL:     {webhook_url}")
    if login is not None:
        click.echo(f"  console login:   {login[0]}  password {login[1]}  (/dashboard/)")
    click.echo(f"  payment link:    {base}/l/{link.id}  ({link.description}, no code: open it and"
               " pay)")


def database_of(config) -> str:
    """The database as the keys file names it: the SQLite file's absolute path, or the PostgreSQL
    URL without its password."""
    where = location(config["DATABASE"])
    return where if "://" in where else os.path.abspath(where)


@click.command("demo-chain")
@click.option("--rpc-url", required=True, help="The local node (Hardhat), e.g. http://127.0.0.1:8545.")
@click.option("--token-build", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The compiled test token {abi, bytecode} taking its supply (tests/chain/token/"
                   "TestUSDC.json: ERC-3009).")
@click.option("--block-seconds", default=0.0, type=click.FloatRange(0, 3600), show_default=True,
              help="Mine an empty block this often besides each transaction (0: only on demand), so"
                   " confirmations come in by themselves.")
@click.option("--feed-build", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Also deploy this compiled test price feed"
                   " (tests/chain/token/TestPriceFeed.json) as a EUR / USD feed at"
                   f" {DEMO_EUR_USD}, and print its address after the token's.")
@click.option("--wait", "wait_seconds", default=60.0, type=click.FloatRange(0, 600),
              show_default=True, help="How long to wait for the node to answer.")
def prepare_chain(rpc_url, token_build, block_seconds, feed_build, wait_seconds):
    """Make a fresh local node ready for the on-chain demo: deploy the test token from a dev account
    (which keeps its whole supply for the shop's test wallet) and print the token's address; with
    --feed-build, a EUR / USD price feed too (its address on the same line)."""
    wallet = DemoWallet(rpc_url)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            wallet.head()
            break
        except RpcError:
            if time.monotonic() >= deadline:
                raise click.ClickException(f"no node answered at {redacted(rpc_url)}") from None
            time.sleep(0.2)
    try:
        token = wallet.deploy_token(token_build)
        if feed_build:
            answer = int(Decimal(DEMO_EUR_USD) * 10**8)
            token += " " + wallet.deploy_feed(feed_build, "EUR / USD", answer)
        if block_seconds:
            wallet.client.call("evm_setIntervalMining", [int(block_seconds * 1000)])
    except RpcError as e:
        raise click.ClickException(str(e)) from None
    click.echo(token)
