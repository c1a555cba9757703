"""The demo shop for testers: a merchant's pages served by the service itself (setting DEMO_SHOP,
off by default), its test-mode merchant, its webhook receiver and, on a local node, its test wallet.

  routes.py         the shop's pages and endpoints (docs/api.md, "Demo shop"); templates/demo/
                    their HTML
  wallet_routes.py  the test wallet's endpoints, on the shop's blueprint (DEMO_WALLET_RPC_URL)
  merchant.py       the demo merchant, its keys kept in DEMO_MERCHANT_FILE (by default beside the
                    SQLite database: each database, make run's and make demo-onchain's, keeps its
                    own)
  inbox.py          the deliveries its receiver got, in memory
  wallet.py         a dev account of a local Hardhat node that pays (`make demo-onchain`)
  cli.py            `flask --app app demo-merchant` and `demo-chain`
"""
import os

from app.db import is_postgres_url
from app.demo import cli, routes, wallet_routes
from app.demo.inbox import WebhookInbox

KEYS_FILE = "demo-merchant.json"


def default_keys_file(app) -> str:
    """Beside the SQLite database (instance/demo-merchant.json for make run's, DEMO_DIR's own for
    make demo-onchain's), so a command given another database never reads or overwrites the file of
    the first; the instance folder for PostgreSQL."""
    database = str(app.config["DATABASE"])
    folder = (app.instance_path if is_postgres_url(database)
              else os.path.dirname(os.path.abspath(database)))
    return os.path.join(folder, KEYS_FILE)


def init_app(app):
    """The commands always (`make run` creates the demo merchant before it starts the shop); the
    pages only with DEMO_SHOP on: a production server never shows them."""
    app.config.setdefault("DEMO_MERCHANT_FILE", default_keys_file(app))
    app.cli.add_command(cli.create_merchant)
    app.cli.add_command(cli.prepare_chain)
    if app.config["DEMO_SHOP"]:
        app.extensions["demo_webhook_inbox"] = WebhookInbox()
        app.register_blueprint(routes.bp)
        # offered by the console
        app.extensions["demo_merchant_wallet"] = wallet_routes.merchant_wallet
