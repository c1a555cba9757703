"""`flask --app app users ...`: the people who log in to the merchant console (docs/console.md).

A password is never an argument (it would sit in the shell history and the process list): it is
prompted twice on a terminal, or read as the first line of standard input otherwise."""
import sys

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli.common import fail, table, when
from app.clock import now
from app.db import get_db
from app.domain import accounts

users = AppGroup("users", help="Manage the merchant console's users.")


def _password():
    if sys.stdin.isatty():
        return click.prompt("Password", hide_input=True, confirmation_prompt=True)
    line = sys.stdin.readline()
    return line[:-1] if line.endswith("\n") else line


def _hash_method():
    return current_app.config["DASHBOARD_PASSWORD_HASH"]


def _run(action, *args, **kwargs):
    try:
        return action(get_db(), *args, **kwargs)
    except accounts.AccountError as e:
        raise fail(e) from None


@users.command("create")
@click.argument("email")
@click.option("--merchant", "merchant_id", required=True,
              help="The merchant whose console it opens.")
@click.option("--role", type=click.Choice(accounts.ROLES), default="owner", show_default=True,
              help="owner: sees and acts; viewer: sees only.")
def create(email, merchant_id, role):
    """Create a console user (the password is prompted, or read from standard input)."""
    user = _run(accounts.create_user, email=email, merchant_id=merchant_id, role=role,
                password=_password(), now=now(), hash_method=_hash_method())
    click.echo(f"Created {user.role} {user.email} for merchant {user.merchant_id}.")


@users.command("list")
def list_():
    """List console users."""
    table(
        [(u.email, u.merchant_id, u.role,
          "disabled " + when(u.disabled_at) if u.disabled_at else "active", when(u.created_at))
         for u in _run(accounts.list_users)],
        ("EMAIL", "MERCHANT", "ROLE", "STATE", "CREATED"),
    )


@users.command("disable")
@click.argument("email")
def disable(email):
    """Disable a user: its sessions end at once and it can no longer log in."""
    ended = _run(accounts.disable_user, email, now())
    click.echo(f"Disabled {accounts.normalize_email(email)} ({ended} session(s) ended).")


@users.command("set-password")
@click.argument("email")
def set_password(email):
    """Set a user's password (prompted, or read from standard input); its sessions end."""
    ended = _run(accounts.set_password, email, _password(), hash_method=_hash_method())
    click.echo(f"Password of {accounts.normalize_email(email)} set ({ended} session(s) ended).")
