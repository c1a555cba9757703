"""The merchant console: server-rendered pages for a merchant's staff at /dashboard/ (API.md "The
merchant console"; decisions in docs/console.md).

  accounts.py  users, login with throttling and lock-out, server-side sessions
  security.py  who is logged in, CSRF tokens, roles, the security headers, error pages
  routes.py    the pages; templates/dashboard/ their HTML, app/static/console/ the stylesheet and JS
"""
from app.console import routes, security


def init_app(app):
    app.register_blueprint(routes.bp)
    security.init_app(app)
