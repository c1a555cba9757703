"""SQL for the merchant console's people: users, their sessions, and failed logins with the locks
they set (app/domain/accounts.py holds the rules)."""
from dataclasses import dataclass

from app.data.schema import dialect


@dataclass(frozen=True)
class User:
    id: int
    email: str
    merchant_id: str
    role: str
    password_hash: str
    disabled_at: int | None
    created_at: int

    def __repr__(self):  # never print the password hash by accident
        return f"User(id={self.id!r}, email={self.email!r}, role={self.role!r})"


_COLUMNS = "u.id, u.email, u.merchant_id, u.role, u.password_hash, u.disabled_at, u.created_at"


def _user(row):
    return User(**{name: row[name] for name in row.keys() if name in User.__dataclass_fields__})


def insert(conn, *, email, merchant_id, role, password_hash, now):
    conn.execute(
        "INSERT INTO users (email, merchant_id, role, password_hash, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (email, merchant_id, role, password_hash, now),
    )


def by_email(conn, email) -> User | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM users u WHERE u.email = ?", (email,)).fetchone()
    return _user(row) if row else None


def list_all(conn) -> list[User]:
    return [_user(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM users u ORDER BY u.email")]


def disable(conn, user_id, now) -> bool:
    return conn.execute("UPDATE users SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL",
                        (now, user_id)).rowcount == 1


def set_password_hash(conn, user_id, password_hash):
    conn.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))


# --- Sessions -------------------------------------------------------------------------------------

def insert_session(conn, *, token_hash, user_id, csrf_token, now, expires_at):
    conn.execute(
        "INSERT INTO console_sessions (token_hash, user_id, csrf_token, created_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (token_hash, user_id, csrf_token, now, expires_at),
    )


def session_user(conn, token_hash, now):
    """(user, csrf token) of a live session of an enabled user on an enabled merchant, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS}, s.csrf_token FROM console_sessions s JOIN users u ON u.id = s.user_id"
        " JOIN merchants m ON m.id = u.merchant_id"
        " WHERE s.token_hash = ? AND s.expires_at > ? AND u.disabled_at IS NULL"
        " AND m.disabled_at IS NULL",
        (token_hash, now),
    ).fetchone()
    return (_user(row), row["csrf_token"]) if row else None


def delete_session(conn, token_hash):
    conn.execute("DELETE FROM console_sessions WHERE token_hash = ?", (token_hash,))


def delete_sessions_of(conn, user_id) -> int:
    return conn.execute("DELETE FROM console_sessions WHERE user_id = ?", (user_id,)).rowcount


def delete_expired_sessions(conn, now):
    conn.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (now,))


# --- Password checks and failed logins ------------------------------------------------------------
# A row per password check, written before the check (failed_at: when it was reserved) and kept
# when it fails, per subject ("email:<email>", "client:<address>"): what the lock-out counts.
# `protected` (1): the email of a user, never evicted by the cap on the others (LOGIN_ROWS_MAX).


def lock_subjects(conn, subjects, now) -> int | None:
    """Hold each subject's lock row until the transaction ends (made when missing, in the order
    given): on PostgreSQL a concurrent login for the same subject waits here, so its counts see
    this one's reservation (SQLite's single writer already serialises them). Returns the latest
    end of a lock in force on any of them, or None."""
    latest = None
    for subject in subjects:
        until = conn.execute(
            "INSERT INTO login_locks (subject, locked_until) VALUES (?, 0) ON CONFLICT (subject)"
            " DO UPDATE SET locked_until = login_locks.locked_until RETURNING locked_until",
            (subject,),
        ).fetchone()[0]
        if until > now and (latest is None or until > latest):
            latest = until
    return latest


def checks_since(conn, subject, since) -> tuple[int, int | None, int | None]:
    """(password checks of `subject` since `since`, failed or in progress; the time of the first
    and of the last)."""
    row = conn.execute(
        "SELECT count(*), min(failed_at), max(failed_at) FROM login_failures"
        " WHERE subject = ? AND failed_at >= ?",
        (subject, since),
    ).fetchone()
    return row[0], row[1], row[2]


def insert_check(conn, subject, now, protected) -> int:
    return conn.execute(
        "INSERT INTO login_failures (subject, failed_at, protected) VALUES (?, ?, ?) RETURNING id",
        (subject, now, int(protected)),
    ).fetchone()[0]


def delete_checks(conn, ids):
    """Forget checks that passed (a login that succeeded is not a failure)."""
    conn.executemany("DELETE FROM login_failures WHERE id = ?", [(i,) for i in ids])


def lock(conn, subject, until):
    conn.execute(
        "INSERT INTO login_locks (subject, locked_until) VALUES (?, ?)"
        " ON CONFLICT (subject) DO UPDATE SET locked_until = excluded.locked_until",
        (subject, until),
    )


# What one login prunes at most, of each kind: expired rows go in small steps, so no login ever
# pays for a backlog at once.
PRUNE_BATCH = 100


def prune(conn, now, window, max_unprotected):
    """Keep what is stored about logins bounded: failures older than the window, locks that have
    ended (and the lock rows of subjects never locked), and beyond the newest `max_unprotected`
    rows, the failures of unknown emails and of client addresses. On PostgreSQL rows another login
    holds are skipped (it prunes them itself), so two logins never wait on each other here."""
    skip = " FOR UPDATE SKIP LOCKED" if dialect(conn) == "postgresql" else ""
    conn.execute(
        "DELETE FROM login_failures WHERE id IN (SELECT id FROM login_failures WHERE failed_at < ?"
        f" ORDER BY failed_at LIMIT {PRUNE_BATCH}{skip})",
        (now - window,),
    )
    conn.execute(
        "DELETE FROM login_locks WHERE subject IN (SELECT subject FROM login_locks"
        f" WHERE locked_until <= ? ORDER BY locked_until LIMIT {PRUNE_BATCH}{skip})",
        (now,),
    )
    conn.execute(
        "DELETE FROM login_failures WHERE id IN (SELECT id FROM login_failures WHERE protected = 0"
        " AND id <= (SELECT max(id) FROM login_failures) - ?"
        f" ORDER BY id LIMIT {PRUNE_BATCH}{skip})",
        (max_unprotected,),
    )


def take_slot(conn, subject, now, until) -> bool:
    """Hold `subject`'s slot (a login_locks row) until `until`, unless it is held past `now`."""
    return conn.execute(
        "INSERT INTO login_locks (subject, locked_until) VALUES (?, ?) ON CONFLICT (subject)"
        " DO UPDATE SET locked_until = excluded.locked_until WHERE login_locks.locked_until <= ?"
        " RETURNING locked_until", (subject, until, now)).fetchone() is not None


def hold_slot(conn, subject, until):
    conn.execute("UPDATE login_locks SET locked_until = ? WHERE subject = ?", (until, subject))


def free_slot(conn, subject):
    conn.execute("DELETE FROM login_locks WHERE subject = ?", (subject,))
