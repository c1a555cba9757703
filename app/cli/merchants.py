"""`flask --app app merchants ...`: accounts, keys and webhook URLs."""
import json

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import endpoints, setup
from app.domain import merchants as service
from app.evm.addresses import ADDRESS_PATH, XpubError

merchants = AppGroup("merchants", help="Create and manage merchants and their keys.")


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except service.MerchantError as e:
        raise fail(e) from None


@merchants.command("create")
@click.option("--name", required=True, help="The merchant's display name.")
@click.option("--live", is_flag=True, help="Live mode (default: test mode, sandbox payments).")
@click.option("--webhook-url", default=None, help="Where webhooks are delivered.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
def create(name, live, webhook_url, as_json):
    """Create a merchant and print its keys (shown this once)."""
    merchant, secret_key = _run(
        service.create, name=name, livemode=live, webhook_url=webhook_url, now=now(),
        allow_loopback=_allow_loopback(),
    )
    if webhook_url:  # on stderr: with --json, stdout stays one JSON object
        _warn_if_refused(webhook_url, merchant.livemode)
    if as_json:
        click.echo(json.dumps(service.credentials(merchant, secret_key)))
        return
    mode = "live" if merchant.livemode else "test"
    click.echo(f"Created merchant {merchant.id} ({merchant.name}, {mode} mode).")
    click.echo("These keys are shown once; keep the secret ones on your server only.")
    click.echo(f"  secret key:      {secret_key}")
    click.echo(f"  public key:      {merchant.public_key}")
    click.echo(f"  webhook secret:  {merchant.webhook_secret}")
    click.echo(f"  webhook URL:     {webhook_url or '(none yet: merchants set-webhook)'}")


@merchants.command("list")
def list_():
    """List merchants."""
    table(
        [
            (
                m.id,
                m.name,
                "live" if m.livemode else "test",
                "disabled" if m.disabled else "active",
                _webhook_column(endpoints.list_of(get_db(), m.id)),
                when(m.created_at),
            )
            for m in service.list_all(get_db())
        ],
        ("ID", "NAME", "MODE", "STATE", "WEBHOOK URL", "CREATED"),
    )


@merchants.command("keys")
@click.argument("merchant_id")
def keys(merchant_id):
    """List a merchant's secret keys (their first characters only)."""
    current = now()
    states = {"revoked": lambda k: "revoked " + when(k.revoked_at), "active": lambda k: "active",
              "expiring": lambda k: "works until " + when(k.expires_at),
              "expired": lambda k: "expired " + when(k.expires_at)}
    table(
        [
            (k.key_prefix + "…", when(k.created_at), states[k.state(current)](k))
            for k in _run(service.keys_of, merchant_id)
        ],
        ("KEY", "CREATED", "STATE"),
    )


@merchants.command("disable")
@click.argument("merchant_id")
def disable(merchant_id):
    """Disable a merchant: its keys stop working at once."""
    _run(service.disable, merchant_id, now())
    click.echo(f"Disabled merchant {merchant_id}.")


@merchants.command("set-webhook")
@click.argument("merchant_id")
@click.argument("url")
def set_webhook(merchant_id, url):
    """Set the URL of the merchant's first webhook endpoint, made if it has none ('' disables
    that endpoint). More endpoints: `endpoints add`."""
    endpoint, warning = _run(service.set_webhook_url, merchant_id, url or None, now(),
                             allow_loopback=_allow_loopback())
    if url:
        click.echo(f"Webhook URL of {merchant_id} set to {url} (endpoint {endpoint.id}).")
    elif endpoint is not None:
        click.echo(f"Webhook endpoint {endpoint.id} of {merchant_id} disabled.")
    else:
        click.echo(f"Merchant {merchant_id} has no webhook endpoint.")
    if warning:
        click.echo(f"Warning: {warning}", err=True)


def _webhook_column(found):
    """The first endpoint's URL, and how many more there are."""
    if not found:
        return "-"
    more = f" (+{len(found) - 1})" if len(found) > 1 else ""
    return (found[0].url if found[0].enabled else f"{found[0].url} (disabled)") + more


def _allow_loopback():
    return current_app.config["WEBHOOK_ALLOW_LOOPBACK"]


def _warn_if_refused(url, livemode):
    try:
        warning = service.check_webhook_url(url, livemode, allow_loopback=_allow_loopback())
    except service.MerchantError as e:  # DNS changed since the URL was saved
        warning = str(e)
    if warning:
        click.echo(f"Warning: {warning}", err=True)


@merchants.command("rotate-key")
@click.argument("merchant_id")
def rotate_key(merchant_id):
    """Issue a new secret key; the old ones keep working until revoked."""
    secret_key = _run(service.rotate_key, merchant_id, now())
    click.echo(f"New secret key (shown once): {secret_key}")
    click.echo("The previous keys still work: revoke them with `merchants revoke-key`"
               " once replaced.")


def _overlap_option(command):
    return click.option(
        "--overlap-hours", type=click.IntRange(0, 8760), default=None,
        help="Hours the old one keeps working beside the new one (default: KEY_ROLL_OVERLAP_HOURS,"
             " 24; 0: it stops at once).")(command)


def _until(overlap_seconds):
    return "at once" if not overlap_seconds else f"until {when(now() + overlap_seconds)}"


@merchants.command("roll-key")
@click.argument("merchant_id")
@_overlap_option
def roll_key(merchant_id, overlap_hours):
    """Replace the secret key: a new one now, the old ones ending after the overlap."""
    overlap = service.roll_overlap_seconds(current_app.config, overlap_hours)
    secret_key = _run(service.roll_key, merchant_id, now(), overlap)
    click.echo(f"New secret key (shown once): {secret_key}")
    click.echo(f"The previous keys stop working {_until(overlap)}: put the new one on your server"
               " before then.")


@merchants.command("rotate-public-key")
@click.argument("merchant_id")
def rotate_public_key(merchant_id):
    """Replace the public key; the old one stops working at once."""
    public_key = _run(service.rotate_public_key, merchant_id)
    click.echo(f"New public key: {public_key}")
    click.echo("The old public key no longer works: update the pages that embed the button.")


@merchants.command("rotate-webhook-secret")
@click.argument("merchant_id")
@_overlap_option
def rotate_webhook_secret(merchant_id, overlap_hours):
    """Replace the signing secret of the merchant's first webhook endpoint; deliveries are signed
    with the old one too (a second signature) until the overlap ends. Others: `endpoints
    roll-secret`."""
    overlap = service.roll_overlap_seconds(current_app.config, overlap_hours)
    secret = _run(service.rotate_webhook_secret, merchant_id, now(), overlap)
    click.echo(f"New webhook secret (shown once): {secret}")
    if overlap:
        click.echo(f"Deliveries carry a signature with the old secret too {_until(overlap)}:"
                   " update your receiver before then.")
    else:
        click.echo("Every delivery from now on, retries included, is signed with it alone:"
                   " update your receiver now.")


@merchants.command("revoke-key")
@click.argument("merchant_id")
@click.argument("key_prefix")
def revoke_key(merchant_id, key_prefix):
    """Revoke the key starting with KEY_PREFIX (at least 12 characters); it stops working at
    once."""
    key = _run(service.revoke_key, merchant_id, key_prefix, now())
    click.echo(f"Revoked key {key.key_prefix}… of {merchant_id}.")


@merchants.command("set-xpub")
@click.argument("merchant_id")
@click.argument("xpub")
def set_xpub(merchant_id, xpub):
    """Register the merchant's account xpub (m/44'/60'/0'); '-' reads it from standard input.

    Never an extended private key (xprv): the service must never hold one. The xpub itself is
    never printed; the first deposit address is, to compare with the wallet's first account."""
    if xpub == "-":
        with click.open_file("-") as stdin:
            xpub = stdin.read()
    try:
        first = setup.set_xpub(get_db(), merchant_id, xpub, now())
    except (XpubError, setup.SetupError) as e:
        raise fail(e) from None
    click.echo(f"Registered the wallet of {merchant_id}. Its first deposit address"
               f" ({ADDRESS_PATH.format(index=0)}) is {first}: check that your wallet shows the"
               " same address for the first account of this seed phrase.")


@merchants.command("set-currency")
@click.argument("merchant_id")
@click.argument("currency")
def set_currency(merchant_id, currency):
    """Price the merchant's new processes in CURRENCY (ISO 4217, e.g. EUR) when their preorder names
    none. Processes already made keep theirs."""
    code = _run(service.set_currency, merchant_id, currency)
    click.echo(f"Currency of {merchant_id}: {code}. New processes without a currency of their own"
               f" are priced in {code}; paying them in a token pegged to another currency needs a"
               f" rate (`rates add` or `rates set`).")


@merchants.command("set-display-name")
@click.argument("merchant_id")
@click.argument("name")
def set_display_name(merchant_id, name):
    """The name the hosted checkout and link pages show (an empty NAME: the merchant's name)."""
    from app.domain import links
    try:
        shown = links.set_display_name(get_db(), merchant_id, name)
    except links.LinkNotFound:
        raise fail(f"No merchant {merchant_id}.") from None
    except links.LinkError as e:
        raise fail(e) from None
    click.echo(f"Checkout pages of {merchant_id} show: {shown or 'its name'}.")


@merchants.command("set-tolerance")
@click.argument("merchant_id")
@click.argument("percent")
def set_tolerance(merchant_id, percent):
    """Let a payment complete when at least the amount due less PERCENT percent arrived (exchanges
    and some wallets deduct their fee from what they send): a decimal from 0 (the default) to 5,
    e.g. 0.5. Applies to payments confirmed from now on."""
    tolerance = _run(service.set_tolerance, merchant_id, percent)
    click.echo(f"Underpayment tolerance of {merchant_id}: {tolerance} %. Payments confirmed from"
               f" now on complete at the amount due less {tolerance} % (rounded up to the token's"
               " smallest unit).")
