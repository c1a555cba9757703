"""`flask --app app demo-merchant`: the test-mode merchant that `make run` sets up for testers."""
import json
import os

import click
from flask import current_app
from flask.cli import with_appcontext

from app import merchants as service
from app.clock import now
from app.db import get_db


@click.command("demo-merchant")
@click.option("--file", "path", default=None, help="Where its keys are kept (default: instance/demo-merchant.json).")
@click.option("--webhook-url", default=None, help="Webhook URL for a newly created demo merchant.")
@with_appcontext
def demo_merchant(path, webhook_url):
    """Create the demo test-mode merchant once, save its keys, and print them."""
    path = path or os.path.join(current_app.instance_path, "demo-merchant.json")
    db = get_db()
    keys = None
    if os.path.exists(path):
        with open(path) as f:
            keys = json.load(f)
        if not any(m.id == keys.get("merchantId") for m in service.list_all(db)):
            keys = None  # the database was reset: make a new one
    if keys is None:
        merchant, secret_key = service.create(
            db, name="Demo shop", livemode=False, webhook_url=webhook_url, now=now()
        )
        keys = {
            "merchantId": merchant.id,
            "secretKey": secret_key,
            "publicKey": merchant.public_key,
            "webhookSecret": merchant.webhook_secret,
            "livemode": False,
        }
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(keys, f, indent=2)
        click.echo(f"Created the demo merchant; its keys are saved in {path} (test mode only).")
    else:
        click.echo(f"Demo merchant from {path}:")
    click.echo(f"  merchant id:     {keys['merchantId']}")
    click.echo(f"  secret key:      {keys['secretKey']}")
    click.echo(f"  public key:      {keys['publicKey']}")
    click.echo(f"  webhook secret:  {keys['webhookSecret']}")
