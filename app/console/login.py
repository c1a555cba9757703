"""Logging in and out (app/domain/accounts.py: the throttling, the lock-out and the sessions;
security.py: the cookies and the CSRF tokens).

  GET  /dashboard/login, POST /dashboard/login, POST /dashboard/logout
"""
from flask import Response, current_app, redirect, render_template, request, url_for

from app.clock import now
from app.console import security
from app.console.pages import bp
from app.console.security import login_required
from app.db import get_db
from app.domain import accounts
from app.web.http import client_address


def _login_page(status=200, error=None, email="", headers=None):
    token = security.new_login_csrf()
    body = render_template("dashboard/login.html", login_csrf=token, error=error, email=email)
    response = Response(body, status=status, headers=headers)
    security.set_cookie(response, security.LOGIN_CSRF_COOKIE, token, samesite="Strict")
    return response


@bp.get("/login")
def login():
    if accounts.session(get_db(), security.read_cookie(security.SESSION_COOKIE), now()) is not None:
        return redirect(url_for("dashboard.overview_page"))
    return _login_page()


@bp.post("/login")
def login_submit():
    if not accounts.same_token(security.read_cookie(security.LOGIN_CSRF_COOKIE),
                               request.form.get("csrf_token")):
        raise security.csrf_refused()
    email = request.form.get("email", "")
    try:
        token, _ = accounts.log_in(get_db(), email=email, password=request.form.get("password", ""),
                                   client=client_address(), now=now(),
                                   session_hours=security.session_hours(),
                                   hash_method=current_app.config["DASHBOARD_PASSWORD_HASH"])
    except accounts.LoginRefused as e:
        minutes = -(-e.retry_after // 60)
        if e.locked:
            message = (f"Too many failed logins: this account is locked for {minutes} more"
                       " minute(s). Every attempt is refused until then, even with the right"
                       " password.")
        else:
            message = f"Too many failed logins: wait {e.retry_after} second(s) before trying again."
        return _login_page(429, message, email, {"Retry-After": str(e.retry_after)})
    except accounts.BadCredentials:
        return _login_page(401, "Wrong email or password.", email)
    except accounts.BadEmail:
        return _login_page(400, f"An email address has at most {accounts.MAX_EMAIL_LENGTH}"
                           " characters.", "")
    response = redirect(url_for("dashboard.overview_page"), 303)
    security.session_cookie(response, token, security.session_hours() * 3600)
    security.delete_cookie(response, security.LOGIN_CSRF_COOKIE)
    return response


@bp.post("/logout")
@login_required
def logout():
    accounts.log_out(get_db(), security.read_cookie(security.SESSION_COOKIE))
    response = redirect(url_for("dashboard.login"), 303)
    security.delete_cookie(response, security.SESSION_COOKIE)
    return response
