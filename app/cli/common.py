"""Helpers shared by the operator commands.

A long-running command (deliver-webhooks, watch-payments) builds its loop with the loop's
`from_app(app, **options)` (the app's database and settings, the command's options as keywords),
runs it inside `stop_on_signals(loop.stop)`, and backs off with app/backoff.py."""
import os
import re
import signal
import time
from contextlib import contextmanager

import click
from flask import current_app

from app.db import location
from app.domain.representation import iso


def when(ts):
    return iso(ts) if ts is not None else "-"


def fail(message) -> click.ClickException:
    """The error a command exits with (status 1, the message on stderr). Every command's failures
    pass here, so a lookup that found nothing (by the code's convention, a message beginning "No ":
    "No merchant mer_….", "No network x (networks add it first).") says where it looked: the SQLite
    file's path, or the PostgreSQL URL without its password (docs/contract.md, "Operating it"). A
    second database (the live demo's) is then told from the first at a glance."""
    message = str(message)
    if message.startswith("No "):
        where = location(current_app.config["DATABASE"])
        named = re.fullmatch(r"(No \S+ [^\s,]+?)(\.| \(.*)", message)  # "No network x (hint)."
        message = (f"{named[1]} in {where}{named[2]}" if named
                   else f"{message.rstrip('.')}; looked in {where}.")
    return click.ClickException(message)


def table(rows, headers):
    """Print rows as aligned columns."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


STOP_AGAIN_SECONDS = 1.0  # a signal this soon after the first is the same stop


@contextmanager
def stop_on_signals(stop):
    """Every long-running command's handling of SIGTERM/SIGINT, for the length of the block: the
    first calls `stop` (it only sets a flag: the command finishes the step under way, commits, and
    exits 0); another one STOP_AGAIN_SECONDS or more after it exits at once, what was not committed
    rolled back as after a crash. One stop often delivers two signals (a process group's SIGTERM,
    then the starting script's own). A SIGINT ignored at start (a shell's background job, as under
    `make run`) stays ignored. After the block the previous handlers are put back, unless a signal
    came (a late second one of the same stop must still find this handler). Main thread only."""
    first = []

    def handle(signum, frame):
        if first and time.monotonic() - first[0] >= STOP_AGAIN_SECONDS:
            os._exit(128 + signum)
        first[:] = first or [time.monotonic()]
        stop()

    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, handle)
    if previous[signal.SIGINT] is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, handle)
    try:
        yield
    finally:
        if not first:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
