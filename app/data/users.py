"""SQL for the merchant console's people: users, their sessions, and failed logins with the locks
they set (app/dashboard/accounts.py holds the rules)."""
from dataclasses import dataclass


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
        "INSERT INTO users (email, merchant_id, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
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
        " WHERE s.token_hash = ? AND s.expires_at > ? AND u.disabled_at IS NULL AND m.disabled_at IS NULL",
        (token_hash, now),
    ).fetchone()
    return (_user(row), row["csrf_token"]) if row else None


def delete_session(conn, token_hash):
    conn.execute("DELETE FROM console_sessions WHERE token_hash = ?", (token_hash,))


def delete_sessions_of(conn, user_id) -> int:
    return conn.execute("DELETE FROM console_sessions WHERE user_id = ?", (user_id,)).rowcount


def delete_expired_sessions(conn, now):
    conn.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (now,))


# --- Failed logins --------------------------------------------------------------------------------

def locked_until(conn, subjects, now) -> int | None:
    """The latest end of a lock in force on any of `subjects`, or None."""
    marks = ", ".join("?" * len(subjects))
    row = conn.execute(
        f"SELECT max(locked_until) FROM login_locks WHERE subject IN ({marks}) AND locked_until > ?",
        (*subjects, now),
    ).fetchone()
    return row[0]


def failures_since(conn, subject, since) -> tuple[int, int | None]:
    """(how many failures of `subject` since `since`, the time of the last one)."""
    row = conn.execute(
        "SELECT count(*), max(failed_at) FROM login_failures WHERE subject = ? AND failed_at >= ?",
        (subject, since),
    ).fetchone()
    return row[0], row[1]


def record_failure(conn, subject, now, window):
    conn.execute("DELETE FROM login_failures WHERE subject = ? AND failed_at < ?", (subject, now - window))
    conn.execute("INSERT INTO login_failures (subject, failed_at) VALUES (?, ?)", (subject, now))


def lock(conn, subject, until):
    conn.execute(
        "INSERT INTO login_locks (subject, locked_until) VALUES (?, ?)"
        " ON CONFLICT (subject) DO UPDATE SET locked_until = excluded.locked_until",
        (subject, until),
    )


def clear_failures(conn, subject):
    conn.execute("DELETE FROM login_failures WHERE subject = ?", (subject,))
