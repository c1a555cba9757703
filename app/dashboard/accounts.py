"""The console's people: users (created by the operator CLI), login with throttling and lock-out,
and server-side sessions (docs/console.md).

Passwords: werkzeug's scrypt hash (salted, memory-hard; werkzeug comes with Flask). Sessions: a
random token in the cookie, its SHA-256 in `console_sessions`: logout, `users disable` and
`users set-password` end sessions at once, and a copy of the database logs nobody in.
Throttling over a 15-minute window: from an email's 5th failure on, its next attempt must wait 1,
2, 4, 8, 16 s; its 10th locks it for 15 minutes, and a client address's 50th (many emails tried
from one place) locks that address; while locked every attempt, the right password included, is
refused.
"""
import functools
import hashlib
import hmac
import re
import secrets

from werkzeug.security import check_password_hash, generate_password_hash

from app.data import merchants as merchant_rows
from app.data import users as user_rows

ROLES = ("owner", "viewer")
MIN_PASSWORD_LENGTH = 10
WINDOW_SECONDS = 15 * 60
SLOW_AFTER = 5            # failures in the window before each attempt must wait
EMAIL_LOCK_AFTER = 10     # failures of one email in the window that lock it
CLIENT_LOCK_AFTER = 50    # failures from one client address in the window that lock it
LOCK_SECONDS = 15 * 60
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


@functools.cache
def _dummy_hash() -> str:
    """Checked when the email is unknown, so that an unknown email costs the same time as a wrong
    password. Made at the first such login, not at import: a scrypt hash takes 32 MiB of memory,
    which every process importing the app (web workers, delivery worker, watcher) would pay."""
    return generate_password_hash("not a password of anyone", method="scrypt")


class AccountError(ValueError):
    """An operator request about a user that cannot be carried out; str() says why."""


class LoginRefused(Exception):
    """Too many failures: `retry_after` seconds before another attempt is looked at."""

    def __init__(self, retry_after, locked):
        super().__init__(f"retry after {retry_after} s")
        self.retry_after, self.locked = retry_after, locked


class BadCredentials(Exception):
    """Unknown email, wrong password or a disabled user: the page never says which."""


def normalize_email(email) -> str:
    return email.strip().lower()


def _hash_token(token) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _check_password(password):
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"The password must have at least {MIN_PASSWORD_LENGTH} characters.")
    return generate_password_hash(password, method="scrypt")


def create_user(db, *, email, merchant_id, role, password, now):
    email = normalize_email(email)
    if not _EMAIL.fullmatch(email):
        raise AccountError(f"{email!r} is not an email address.")
    if role not in ROLES:
        raise AccountError(f"The role must be one of {', '.join(ROLES)}.")
    password_hash = _check_password(password)
    with db.transaction() as conn:
        if merchant_rows.get(conn, merchant_id) is None:
            raise AccountError(f"No merchant {merchant_id}.")
        if user_rows.by_email(conn, email) is not None:
            raise AccountError(f"A user {email} exists already.")
        user_rows.insert(conn, email=email, merchant_id=merchant_id, role=role,
                         password_hash=password_hash, now=int(now))
    return user_rows.by_email(db.connection(), email)


def _existing(conn, email):
    user = user_rows.by_email(conn, normalize_email(email))
    if user is None:
        raise AccountError(f"No user {normalize_email(email)}.")
    return user


def list_users(db):
    return user_rows.list_all(db.connection())


def disable_user(db, email, now) -> int:
    """Disable a user and end its sessions at once; returns how many were ended."""
    with db.transaction() as conn:
        user = _existing(conn, email)
        if not user_rows.disable(conn, user.id, int(now)):
            raise AccountError(f"User {user.email} is already disabled.")
        return user_rows.delete_sessions_of(conn, user.id)


def set_password(db, email, password) -> int:
    """A new password; every session of the user ends (whoever knew the old one is logged out)."""
    password_hash = _check_password(password)
    with db.transaction() as conn:
        user = _existing(conn, email)
        user_rows.set_password_hash(conn, user.id, password_hash)
        return user_rows.delete_sessions_of(conn, user.id)


def _subjects(email, client):
    return [f"email:{email}", f"client:{client}"]


def _throttle(conn, email, client, now):
    """Raise LoginRefused while a lock is in force or a slowed-down attempt comes too soon."""
    until = user_rows.locked_until(conn, _subjects(email, client), now)
    if until is not None:
        raise LoginRefused(until - now, locked=True)
    count, last = user_rows.failures_since(conn, f"email:{email}", now - WINDOW_SECONDS)
    if count >= SLOW_AFTER and now < last + 2 ** (count - SLOW_AFTER):
        raise LoginRefused(last + 2 ** (count - SLOW_AFTER) - now, locked=False)


def log_in(db, *, email, password, client, now, session_hours):
    """(session token for the cookie, user), or LoginRefused / BadCredentials."""
    email, now = normalize_email(email), int(now)
    conn = db.connection()
    _throttle(conn, email, client, now)
    user = user_rows.by_email(conn, email) if email else None
    # The hash is always checked, so an unknown email costs as long as a wrong password.
    good = check_password_hash(user.password_hash if user else _dummy_hash(), password)
    admitted = (good and user is not None and user.disabled_at is None
                and not merchant_rows.get(conn, user.merchant_id).disabled)
    if not admitted:
        with db.transaction() as conn:  # committed: the failure counts
            for subject, limit in zip(_subjects(email, client), (EMAIL_LOCK_AFTER, CLIENT_LOCK_AFTER)):
                user_rows.record_failure(conn, subject, now, WINDOW_SECONDS)
                if user_rows.failures_since(conn, subject, now - WINDOW_SECONDS)[0] >= limit:
                    user_rows.lock(conn, subject, now + LOCK_SECONDS)
        raise BadCredentials()
    with db.transaction() as conn:
        # Attempts made at once all pass _throttle before any failure is recorded: a lock that
        # one of them set meanwhile still refuses this one.
        until = user_rows.locked_until(conn, _subjects(email, client), now)
        if until is not None:
            raise LoginRefused(until - now, locked=True)
        user_rows.clear_failures(conn, f"email:{email}")
        user_rows.delete_expired_sessions(conn, now)
        token = secrets.token_urlsafe(32)
        user_rows.insert_session(conn, token_hash=_hash_token(token), user_id=user.id,
                                 csrf_token=secrets.token_urlsafe(32), now=now,
                                 expires_at=now + int(session_hours * 3600))
    return token, user


def session(db, token, now):
    """(user, csrf token) of the session this cookie token opens, or None."""
    if not token:
        return None
    return user_rows.session_user(db.connection(), _hash_token(token), int(now))


def log_out(db, token):
    if token:
        with db.transaction() as conn:
            user_rows.delete_session(conn, _hash_token(token))


def same_token(expected, given) -> bool:
    """Constant-time comparison of a CSRF token."""
    return bool(expected) and bool(given) and hmac.compare_digest(expected.encode(), given.encode())
