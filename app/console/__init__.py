"""The merchant console: server-rendered pages for a merchant's staff at /dashboard/
(docs/contract.md, "The merchant console"; decisions in docs/console.md). Every page but the
login needs a session (security.login_required); every change needs the owner role and the form's
CSRF token. The pages call the domain (app/domain/processes.py, app/domain/refunds.py,
app/domain/accounts.py: users, login and sessions, ...), never app/data/.

  security.py   who is logged in, CSRF tokens, roles, the security headers, error pages
  pages.py      the blueprint and what every page shares: notices after a change (PRG),
                confirmation pages, template filters, the names of assets and networks
  login.py      logging in and out
  overview.py   the overview (per asset, per currency) and its charts
  processes.py  the processes list and its CSV export
  process.py    one process: timeline, payment, unexpected transfers, events; cancel, resend, accept
  refunds.py    a process's refunds: the form, the refund's page, naming its transaction, cancelling
  keys.py       the secret keys and the webhook secret: rolling, revoking
  webhooks.py   the webhook URL, test events, failing deliveries, the events list
  links.py      payment links: create, deactivate, each one's address and QR code; the display
                name checkout pages show
  payouts.py    where the money goes, what waits per network, collecting it, the collections
  settings.py   the owner's settings: display name, currency, tolerance, payout address
Templates: templates/dashboard/ (one layout, its pages and macros.html); the stylesheet and
scripts: app/static/console/.
"""
# Importing each page module registers its routes on pages.bp.
from app.console import (  # noqa: F401
    keys,
    links,
    login,
    overview,
    pages,
    payouts,
    process,
    processes,
    refunds,
    security,
    settings,
    webhooks,
)


def init_app(app):
    app.register_blueprint(pages.bp)
    security.init_app(app)
