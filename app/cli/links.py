"""`flask --app app links ...`: payment links (docs/api.md, "Payment links"), and the name checkout
pages show (`merchants set-display-name`, in app/cli/merchants.py)."""

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.core import jsonutil
from app.db import get_db
from app.domain import links as service
from app.domain import merchants, processes
from app.domain.representation import link_json
from app.web.schemas import LinkSchema

links = AppGroup("links", help="Payment links: one thing sold again and again, without code.")


def _base():
    """The service's public base URL (PUBLIC_BASE_URL); unset, links print as paths."""
    return current_app.config.get("PUBLIC_BASE_URL") or ""


def _merchant(merchant_id):
    merchant = merchants.get(get_db(), merchant_id)
    if merchant is None:
        raise fail(f"No merchant {merchant_id}.")
    return merchant


@links.command("create")
@click.argument("merchant_id")
@click.option("--amount", required=True, help="The price, e.g. 19.99 (in --currency).")
@click.option("--description", required=True, help="What is sold, shown to the customer.")
@click.option("--currency", default=None, help="ISO 4217 (default: the merchant's).")
@click.option("--max-payments", type=click.IntRange(1), default=None,
              help="It stops after this many completed payments (default: unlimited).")
@click.option("--expires-at", default=None, metavar="TIME",
              help="It stops at this UTC time, YYYY-MM-DDTHH:MM:SSZ (default: never).")
@click.option("--success-url", default=None, help="Where the customer goes once paid.")
@click.option("--json", "as_json", is_flag=True, help="Print the Link object.")
def links_create(merchant_id, amount, description, currency, max_payments, expires_at, success_url,
                 as_json):
    """Create a payment link for MERCHANT_ID and print its id and URL."""
    merchant = _merchant(merchant_id)
    body = {"amount": jsonutil.JSONNumber(amount.strip()) if _number(amount) else amount,
            "description": description, "currency": currency, "successUrl": success_url,
            "maxPayments": jsonutil.JSONNumber(str(max_payments)) if max_payments else None,
            "expiresAt": expires_at}
    schema = LinkSchema(current_app.extensions["preorder_schema"].limits)
    errors = schema.validate({k: v for k, v in body.items() if v is not None})
    if errors:
        raise fail(" ".join(f"--{k}: {' '.join(v)}" for k, v in errors.items()))
    fields = schema.load({k: v for k, v in body.items() if v is not None})
    try:
        link = service.create(get_db(), merchant, amount=fields["amount"],
                              description=fields["description"], now=now(),
                              currency=fields.get("currency"), success_url=fields.get("successUrl"),
                              max_payments=fields.get("maxPayments"),
                              expires_at=fields.get("expiresAt"))
    except (service.LinkError, processes.InvalidAmount, processes.InvalidUrl) as e:
        raise fail(e) from None
    if as_json:
        click.echo(link_json(link, 0, _base(), int(now())))
        return
    click.echo(f"Created payment link {link.id}: {_base()}/l/{link.id}"
               + ("" if _base() else "  (under the service's address:"
                                     " set PUBLIC_BASE_URL to print it whole)"))


def _number(text) -> bool:
    try:
        jsonutil.loads(text.strip().encode())
    except jsonutil.InvalidJSON:
        return False
    return True


@links.command("list")
@click.argument("merchant_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of Link objects.")
def links_list(merchant_id, as_json):
    """MERCHANT_ID's links, newest first, with their payments."""
    _merchant(merchant_id)
    db, current = get_db(), int(now())
    found, _ = service.page(db, merchant_id, limit=1000)
    paid = service.payments(db, found)
    if as_json:
        click.echo("[" + ",".join(link_json(link, paid.get(link.id, 0), _base(), current)
                                  for link in found) + "]")
        return
    table([(link.id, f"{link.amount} {link.currency}", paid.get(link.id, 0),
            link.max_payments or "-", link.why_unavailable(paid.get(link.id, 0), current)
            or "active", when(link.expires_at), link.description[:40]) for link in found],
          ("LINK", "PRICE", "PAID", "MAX", "STATE", "EXPIRES", "DESCRIPTION"))


@links.command("deactivate")
@click.argument("link_id")
def links_deactivate(link_id):
    """Stop LINK_ID making new payments (those started may still complete)."""
    try:
        service.deactivate(get_db(), None, link_id, now())
    except service.LinkNotFound:
        raise fail(f"No link {link_id}.") from None
    click.echo(f"Deactivated payment link {link_id}: it now answers 'no longer available'.")
