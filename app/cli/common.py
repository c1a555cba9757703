"""Helpers shared by the operator commands."""
import click

from app.representation import iso


def when(ts):
    return iso(ts) if ts is not None else "-"


def table(rows, headers):
    """Print rows as aligned columns."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
