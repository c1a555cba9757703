"""The demo shop for testers: a merchant's pages served by the service itself (setting DEMO_SHOP,
off by default), its test-mode merchant, its webhook receiver and, on a local node, its test wallet.

  routes.py    the pages and endpoints (docs/api.md, "Demo shop"); templates/demo/ their HTML
  merchant.py  the demo merchant, its keys kept in DEMO_MERCHANT_FILE
  inbox.py     the deliveries its receiver got, in memory
  wallet.py    a dev account of a local Hardhat node that pays (`make demo-live`)
  cli.py       `flask --app app demo-merchant` and `demo-chain`
"""
import os

from app.demo import cli, routes
from app.demo.inbox import WebhookInbox


def init_app(app):
    """The commands always (`make run` creates the demo merchant before it starts the shop); the
    pages only with DEMO_SHOP on: a production server never shows them."""
    app.config.setdefault("DEMO_MERCHANT_FILE", os.path.join(app.instance_path, "demo-merchant.json"))
    app.cli.add_command(cli.create_merchant)
    app.cli.add_command(cli.prepare_chain)
    if app.config["DEMO_SHOP"]:
        app.extensions["demo_webhook_inbox"] = WebhookInbox()
        app.register_blueprint(routes.bp)
