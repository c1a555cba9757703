"""`flask --app app demo-merchant`: the test-mode merchant that `make run` sets up for testers."""
import click
from flask import current_app
from flask.cli import with_appcontext

from app.clock import now
from app.db import get_db
from app.demo_merchant import ensure as ensure_demo_merchant
from app.merchants import MerchantError


@click.command("demo-merchant")
@click.option("--file", "path", default=None,
              help="Where its keys are kept (default: the DEMO_MERCHANT_FILE setting,"
                   " instance/demo-merchant.json).")
@click.option("--webhook-url", default=None,
              help="Webhook URL of the demo merchant, set whether it is new or not"
                   " (make run: its built-in receiver, http://127.0.0.1:5000/demo/webhooks).")
@with_appcontext
def demo_merchant(path, webhook_url):
    """Create the demo test-mode merchant once, save its keys, and print them."""
    path = path or current_app.config["DEMO_MERCHANT_FILE"]
    try:
        keys, created = ensure_demo_merchant(get_db(), path, webhook_url=webhook_url, now=now())
    except MerchantError as e:
        raise click.ClickException(str(e)) from None
    if created:
        click.echo(f"Created the demo merchant; its keys are saved in {path} (test mode only).")
    else:
        click.echo(f"Demo merchant from {path}:")
    click.echo(f"  merchant id:     {keys['merchantId']}")
    click.echo(f"  secret key:      {keys['secretKey']}")
    click.echo(f"  public key:      {keys['publicKey']}")
    click.echo(f"  webhook secret:  {keys['webhookSecret']}")
    if webhook_url is not None:
        click.echo(f"  webhook URL:     {webhook_url}")
