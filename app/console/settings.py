"""The settings page: what the owner sets about the shop, in one place (docs/console.md
"Settings"): the display name customers' pages show, the currency of new processes, the
underpayment tolerance and the payout address. A viewer reads every value and gets no form (a POST
is 403). Each form answers a 303 back to its panel saying it was saved, or 400 in place with why.

  GET  /dashboard/settings; POST /dashboard/settings/display-name,
  /dashboard/settings/currency, /dashboard/settings/tolerance, /dashboard/settings/payout
"""
from babel.numbers import get_currency_name
from flask import g, redirect, render_template, request, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import PageError, login_required, owner_required
from app.core import currency
from app.db import get_db
from app.domain import links, merchants, payouts, setup
from app.domain.setup import SetupError

# The panels of the page, by the `done` key of the change a notice follows.
SECTIONS = {"currency": "currency", "tolerance": "tolerance", "payout": "payout"}


@bp.get("/settings")
@login_required
def settings_page(notice=None, error=None, status=200, section=None):
    """`section`: the panel a refused change (`error`) or a saved one (`done`) belongs to."""
    notice = notice or pages.notice()
    section = section or SECTIONS.get(request.args.get("done"))
    db = get_db()
    owner = g.user.role == "owner"
    payout = payouts.payout_of(db, g.merchant.id)
    has_xpub = setup.has_xpub(db, g.merchant.id)
    return render_template("dashboard/settings.html", payout=payout, has_xpub=has_xpub,
                           tolerance=merchants.tolerance_of(db, g.merchant.id),
                           currencies=_currencies() if owner else (),
                           payout_form=owner and (payout or not has_xpub),
                           currency_name=currency_name(g.merchant.currency),
                           notice=notice, error=error, section=section), status


def currency_name(code):
    return get_currency_name(code, locale="en")  # the code itself where Babel has no name


def _currencies():
    """The currency form's choices: every code a process may be priced in (app/core/currency.py
    known), with its English name, by code."""
    return [(code, currency_name(code)) for code in sorted(currency.known())]


@bp.post("/settings/payout")
@login_required
@owner_required
def set_payout():
    """The payout address (merchants set-payout). An address without an EIP-55 checksum (all lower
    or all upper case) is saved only once confirmed: the confirmation page names the risk and
    posts it again with `unchecked`. A merchant in xpub mode gets no form: its switch to the
    payout mode (which needs the networks' factories) is the operator's."""
    db = get_db()
    if payouts.payout_of(db, g.merchant.id) is None and setup.has_xpub(db, g.merchant.id):
        return settings_page(error="This shop is paid to its wallet's xpub: switching it to a"
                             " payout address is done by the operator (merchants set-payout).",
                             status=409, section="payout")
    try:
        address = pages.ascii_value((request.form.get("address") or "").strip(), "address")
        payouts.set_payout(db, g.merchant.id, address, now(),
                           unchecked=request.form.get("unchecked") == "1")
    except payouts.UncheckedAddress as e:
        return pages.confirm(
            "Save a payout address without a checksum?",
            f"{e} Every payment confirmed from now on is forwarded to it. Copy the address from"
            " your wallet, which shows it with its checksum (in mixed case), and paste that"
            " instead; or save this one only if you have checked it character by character.",
            url_for("dashboard.set_payout"), "Save without checksum",
            url_for("dashboard.settings_page", _anchor="payout"),
            fields={"address": e.typed, "unchecked": "1"})
    except SetupError as e:
        return settings_page(error=str(e), status=400, section="payout")
    return pages.done("dashboard.settings_page", "payout", _anchor="payout")


@bp.post("/settings/tolerance")
@login_required
@owner_required
def set_tolerance():
    """The underpayment tolerance (merchants set-tolerance). Read as ASCII: "٣" is not 3."""
    try:
        tolerance = pages.ascii_value(request.form.get("tolerance", ""), "tolerance")
        merchants.set_tolerance(get_db(), g.merchant.id, tolerance)
    except merchants.MerchantError as e:
        return settings_page(error=str(e), status=400, section="tolerance")
    return pages.done("dashboard.settings_page", "tolerance", _anchor="tolerance")


@bp.post("/settings/currency")
@login_required
@owner_required
def set_currency():
    """The currency of the merchant's new processes whose preorder names none (merchants
    set-currency)."""
    try:
        merchants.set_currency(get_db(), g.merchant.id,
                               (request.form.get("currency") or "").strip())
    except merchants.MerchantError as e:
        return settings_page(error=str(e), status=400, section="currency")
    return pages.done("dashboard.settings_page", "currency", _anchor="currency")


@bp.post("/settings/display-name")
@login_required
@owner_required
def set_display_name():
    """The name checkout pages and link pages show (merchants set-display-name); blank: the
    merchant's name again."""
    try:
        links.set_display_name(get_db(), g.merchant.id, request.form.get("display_name", ""))
    except links.LinkError as e:
        raise PageError(400, "Display name refused",
                        " ".join(e.errors["displayName"]) + " Go back and try again.") from None
    return redirect(url_for("dashboard.settings_page", done="display-name",
                            _anchor="display-name"), 303)
