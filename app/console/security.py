"""The console's guards: the logged-in user (`login_required`), the CSRF token of every form,
the owner role for changes, the security headers of every page, and errors as readable pages.

CSRF: a token bound to the server-side session (a random value in its row) is a hidden field of
every form and compared in constant time on every POST; the login form, before any session exists,
uses a double-submit token (the same random value in a SameSite=Strict cookie and in the form)."""
import secrets
from functools import wraps

from flask import current_app, g, redirect, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from app.clock import now
from app.db import get_db
from app.domain import accounts, merchants
from app.web.http import CSP

PREFIX = "/dashboard"
# The console's cookies: (name, path over plain HTTP). Behind HTTPS: __Host-<name>, path /
# (cookie()).
SESSION_COOKIE = ("console_session", PREFIX)
LOGIN_CSRF_COOKIE = ("console_login_csrf", PREFIX + "/login")


class PageError(HTTPException):
    """An error the console answers with its own page: `code`, a title and a message."""

    def __init__(self, code, title, message, headers=None):
        super().__init__(message)
        self.code, self.title, self.message = code, title, message
        self.extra_headers = headers or {}


def not_found():
    return PageError(404, "Not found",
                     "There is no such page or process in this merchant's console.")


def login_required(view):
    """Sets g.user, g.csrf_token and g.merchant, or sends the visitor to the login page. On POST,
    the form's CSRF token must be the session's."""

    @wraps(view)
    def guarded(*args, **kwargs):
        found = accounts.session(get_db(), read_cookie(SESSION_COOKIE), now())
        if found is None:
            if request.method != "GET":
                raise PageError(401, "Logged out", "Your session has ended: log in again.")
            return redirect(url_for("dashboard.login"))
        g.user, g.csrf_token = found
        g.merchant = merchants.get(get_db(), g.user.merchant_id)
        if request.method == "POST" and not accounts.same_token(g.csrf_token,
                                                                request.form.get("csrf_token")):
            raise csrf_refused()
        return view(*args, **kwargs)

    return guarded


def csrf_refused():
    return PageError(400, "Form refused", "This form's security token is missing or out of date:"
                     " go back, reload the page and try again.")


def owner_required(view):
    """After login_required: a viewer sees but changes nothing."""

    @wraps(view)
    def guarded(*args, **kwargs):
        if g.user.role != "owner":
            raise PageError(403, "Not allowed", "Your role (viewer) can see this console but not"
                            " change anything: ask an owner of this merchant.")
        return view(*args, **kwargs)

    return guarded


def new_login_csrf():
    return secrets.token_urlsafe(32)


def cookie(which):
    """(name, path) of one of the console's cookies for this request. Behind HTTPS the name has the
    `__Host-` prefix, which browsers accept only from this very host, over HTTPS, with Path=/ and
    no Domain: a sibling subdomain (or a plain-HTTP answer forged on the way) can neither plant nor
    shadow it. Over plain HTTP (a developer's machine, where browsers refuse the prefix) the bare
    name, scoped to the console's path. Only the prefixed one is read behind HTTPS."""
    name, path = which
    return ("__Host-" + name, "/") if request.is_secure else (name, path)


def read_cookie(which):
    return request.cookies.get(cookie(which)[0])


def set_cookie(response, which, value, *, samesite, max_age=None):
    name, path = cookie(which)
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, samesite=samesite,
                        secure=request.is_secure)


def delete_cookie(response, which):
    name, path = cookie(which)
    response.delete_cookie(name, path=path, httponly=True, secure=request.is_secure)


def session_cookie(response, token, max_age):
    set_cookie(response, SESSION_COOKIE, token, samesite="Lax", max_age=max_age)


def _is_console():
    return request.path == PREFIX or request.path.startswith(PREFIX + "/")


def _headers(response):
    if _is_console():
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Content-Type-Options"] = "nosniff"
        if not request.path.startswith(PREFIX + "/static/"):
            # Pages hold customers' data and, once, a new key: never kept by a browser or a proxy.
            response.headers["Cache-Control"] = "no-store"
    return response


def error_page(code, title, message, headers=None):
    user = getattr(g, "user", None)
    body = render_template("dashboard/error.html", code=code, title=title, message=message,
                           user=user)
    return body, code, headers or {}


def html_error(e):
    """For the app's error handlers: a console request's error as a page, else None."""
    if not _is_console():
        return None
    if isinstance(e, HTTPException) and e.code == 404:
        e = not_found()
    if isinstance(e, PageError):
        return error_page(e.code, e.title, e.message, e.extra_headers)
    if isinstance(e, HTTPException):
        titles = {405: "Not allowed", 413: "Too large"}
        return error_page(e.code, titles.get(e.code, e.name), e.description or e.name)
    return error_page(500, "Something went wrong", "An internal error occurred; it has been logged."
                      " Try again, or ask the operator of this service.")


def init_app(app):
    app.after_request(_headers)
    app.extensions["html_errors"] = html_error


def session_hours():
    return current_app.config["DASHBOARD_SESSION_HOURS"]
