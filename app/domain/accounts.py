"""The console's people: users (created by the operator CLI), login with throttling and lock-out,
and server-side sessions (docs/console.md).

Passwords: werkzeug's scrypt hash (salted, memory-hard; werkzeug comes with Flask). Sessions: a
random token in the cookie, its SHA-256 in `console_sessions`: logout, `users disable` and
`users set-password` end sessions at once, and a copy of the database logs nobody in.
Throttling over a 15-minute window, counting password checks: each is reserved in a transaction
that holds the email's and the client's lock rows (so attempts at once, on any worker, are counted
one after the other) before the password is looked at, and stays counted when it fails. From an
email's 5th check on, its next one must wait 1, 2, 4, 8, 16 s; at 10 it is refused until the
window moves on, and its 10th failure locks it for 15 minutes; a client address's 50th failure
(many emails tried from one place) locks that address. While locked every attempt, the right
password included, is refused: at most 10 wrong passwords are ever checked for one email in 15
minutes. What is kept stays bounded (`users.prune`).
"""
import functools
import hashlib
import hmac
import logging
import re
import secrets

from werkzeug.security import check_password_hash, generate_password_hash

from app.data import merchants as merchant_rows
from app.data import users as user_rows

log = logging.getLogger(__name__)

ROLES = ("owner", "viewer")
MIN_PASSWORD_LENGTH = 10
WINDOW_SECONDS = 15 * 60
SLOW_AFTER = 5            # failures in the window before each attempt must wait
EMAIL_LOCK_AFTER = 10     # failures of one email in the window that lock it
CLIENT_LOCK_AFTER = 50    # failures from one client address in the window that lock it
LOCK_SECONDS = 15 * 60
MAX_EMAIL_LENGTH = 254    # RFC 5321's longest address: a longer one is refused before anything
# Failed logins kept of unknown emails and client addresses, the newest (a user's email's are kept
# whatever their number: at most 10 a window each). Enough for the 50-failure client lock of a
# dozen clients at once; beyond it an attacker with many addresses mostly evicts its own rows.
LOGIN_ROWS_MAX = 1000
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


@functools.cache
def _dummy_hash(method) -> str:
    """Checked when the email is unknown, so that an unknown email costs the same time as a wrong
    password. Made at the first such login, not at import: a scrypt hash takes 32 MiB of memory,
    which every process importing the app (web workers, delivery worker, watcher) would pay."""
    return generate_password_hash("not a password of anyone", method=method)


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
    """Trimmed, lowercased; a NUL character (no address has one; PostgreSQL's text cannot hold it)
    as U+FFFD, so a login attempt with one is counted and refused like any unknown email."""
    return email.strip().lower().replace("\x00", "\ufffd")


def _hash_token(token) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _check_password(password, hash_method):
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"The password must have at least {MIN_PASSWORD_LENGTH} characters.")
    return generate_password_hash(password, method=hash_method)


def create_user(db, *, email, merchant_id, role, password, now, hash_method):
    """A console user. `hash_method`: werkzeug's method for its password hash (the setting
    DASHBOARD_PASSWORD_HASH, default scrypt), as for set_password and log_in."""
    email = normalize_email(email)
    if len(email) > MAX_EMAIL_LENGTH or not _EMAIL.fullmatch(email):
        raise AccountError(f"{email[:MAX_EMAIL_LENGTH]!r} is not an email address.")
    if role not in ROLES:
        raise AccountError(f"The role must be one of {', '.join(ROLES)}.")
    password_hash = _check_password(password, hash_method)
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


def user_by_email(db, email):
    """The user with this email, or None."""
    return user_rows.by_email(db.connection(), normalize_email(email))


def list_users(db):
    return user_rows.list_all(db.connection())


def disable_user(db, email, now) -> int:
    """Disable a user and end its sessions at once; returns how many were ended."""
    with db.transaction() as conn:
        user = _existing(conn, email)
        if not user_rows.disable(conn, user.id, int(now)):
            raise AccountError(f"User {user.email} is already disabled.")
        return user_rows.delete_sessions_of(conn, user.id)


def set_password(db, email, password, *, hash_method) -> int:
    """A new password; every session of the user ends (whoever knew the old one is logged out)."""
    password_hash = _check_password(password, hash_method)
    with db.transaction() as conn:
        user = _existing(conn, email)
        user_rows.set_password_hash(conn, user.id, password_hash)
        return user_rows.delete_sessions_of(conn, user.id)


def _subjects(email, client):
    return [f"email:{email}", f"client:{client}"]


class BadEmail(ValueError):
    """The email given at login is longer than any address can be: refused, nothing stored."""


def _reserve(conn, email, client, now, protected):
    """In the caller's transaction: one password check for `email` from `client`, or LoginRefused.
    The subjects' lock rows are held (users.lock_subjects), then their counts decide, then the
    check is written: attempts at once are counted one after the other. Returns the rows' ids."""
    subjects = _subjects(email, client)
    until = user_rows.lock_subjects(conn, subjects, now)
    # After the subjects' rows are held, never before: the prune waits for nothing (rows another
    # login holds are skipped), so a login waits only for the logins of its own email or client.
    user_rows.prune(conn, now, WINDOW_SECONDS, LOGIN_ROWS_MAX)
    if until is not None:
        raise LoginRefused(until - now, locked=True)
    since = now - WINDOW_SECONDS
    for subject, limit in zip(subjects, (EMAIL_LOCK_AFTER, CLIENT_LOCK_AFTER), strict=True):
        count, first, last = user_rows.checks_since(conn, subject, since)
        if count >= limit:  # failed or still being checked: no more until the window moves on
            raise LoginRefused(max(1, first + WINDOW_SECONDS - now), locked=True)
        if (subject.startswith("email:") and count >= SLOW_AFTER
                and now < last + 2 ** (count - SLOW_AFTER)):
            raise LoginRefused(last + 2 ** (count - SLOW_AFTER) - now, locked=False)
    return [user_rows.insert_check(conn, subject, now, protected and subject.startswith("email:"))
            for subject in subjects]


def _failed(conn, email, client, now):
    """After a wrong password (its checks stay): lock the subjects that reached their limit."""
    since = now - WINDOW_SECONDS
    for subject, limit in zip(_subjects(email, client), (EMAIL_LOCK_AFTER, CLIENT_LOCK_AFTER),
                              strict=True):
        if user_rows.checks_since(conn, subject, since)[0] >= limit:
            user_rows.lock(conn, subject, now + LOCK_SECONDS)


def log_in(db, *, email, password, client, now, session_hours, hash_method):
    """(session token for the cookie, user), or BadEmail / LoginRefused / BadCredentials."""
    email, now = normalize_email(email), int(now)
    if len(email) > MAX_EMAIL_LENGTH:
        raise BadEmail()
    user = user_rows.by_email(db.connection(), email) if email else None
    with db.transaction() as conn:
        checks = _reserve(conn, email, client, now, protected=user is not None)
    # The hash is always checked, so an unknown email costs as long as a wrong password.
    good = check_password_hash(user.password_hash if user else _dummy_hash(hash_method), password)
    log.info("console login: password checked for %s: %s",
             f"user {user.id}" if user else "an unknown email", "right" if good else "wrong")
    admitted = (good and user is not None and user.disabled_at is None
                and not merchant_rows.get(db.connection(), user.merchant_id).disabled)
    if not admitted:
        with db.transaction() as conn:  # committed: the failure counts
            _failed(conn, email, client, now)
        raise BadCredentials()
    with db.transaction() as conn:
        # A check that passed is not a failure. The failures before it stay until they age out
        # of the window: a success never buys another ten guesses.
        user_rows.delete_checks(conn, checks)
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


# One CSV export at a time per user, over all its sessions and workers: a slot held while rows are
# sent, renewed after each batch, freed when the export ends or its client goes away; a worker that
# died holding it lets it lapse after EXPORT_SLOT_SECONDS without progress.
EXPORT_SLOT_SECONDS = 60


def _export_subject(user_id) -> str:
    return f"export:{user_id}"


def begin_export(db, user_id, now) -> bool:
    """Whether the user may start an export now (then it holds the slot)."""
    with db.transaction() as conn:
        return user_rows.take_slot(conn, _export_subject(user_id), int(now),
                                   int(now) + EXPORT_SLOT_SECONDS)


def keep_export(db, user_id, now):
    with db.transaction() as conn:
        user_rows.hold_slot(conn, _export_subject(user_id), int(now) + EXPORT_SLOT_SECONDS)


def end_export(db, user_id):
    with db.transaction() as conn:
        user_rows.free_slot(conn, _export_subject(user_id))
