-- Version 6 (SQLite): the merchant console (docs/console.md). Its users, their server-side sessions,
-- failed logins (throttling and lock-out), and the index of metadata values the console searches.

-- People who log in to the console; each belongs to one merchant. Emails are stored lowercased.
CREATE TABLE IF NOT EXISTS users (
    id               INTEGER PRIMARY KEY,
    email            TEXT NOT NULL UNIQUE,
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    role             TEXT NOT NULL CHECK (role IN ('owner', 'viewer')),
    password_hash    TEXT NOT NULL,                 -- werkzeug's scrypt hash (salted, slow)
    disabled_at      INTEGER,
    created_at       INTEGER NOT NULL
);

-- Logged-in sessions. The cookie holds a random token; only its SHA-256 is stored, so a copy of
-- the database logs nobody in. Deleting the row ends the session at once (logout, users disable).
CREATE TABLE IF NOT EXISTS console_sessions (
    token_hash       TEXT PRIMARY KEY,
    user_id          INTEGER NOT NULL REFERENCES users (id),
    csrf_token       TEXT NOT NULL,                 -- the session's CSRF token, in every form
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_user ON console_sessions (user_id);

-- Failed logins, per email and per client address ("email:<email>", "client:<address>"), and the
-- locks they set. Rows older than the window are deleted as new ones are written.
CREATE TABLE IF NOT EXISTS login_failures (
    id               INTEGER PRIMARY KEY,
    subject          TEXT NOT NULL,
    failed_at        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS login_failures_subject ON login_failures (subject, failed_at);
CREATE TABLE IF NOT EXISTS login_locks (
    subject          TEXT PRIMARY KEY,
    locked_until     INTEGER NOT NULL
);

-- The console's search: each top-level scalar metadata value of a process (lowercased), written in
-- the transaction that creates the process. (merchant_id, value, seq) answers "newest first".
CREATE TABLE IF NOT EXISTS process_search (
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    value            TEXT NOT NULL,
    seq              INTEGER NOT NULL REFERENCES processes (seq),
    PRIMARY KEY (merchant_id, value, seq)
);

-- The console's status filter, newest first.
CREATE INDEX IF NOT EXISTS processes_merchant_status_seq ON processes (merchant_id, status, seq);

-- The processes already there become searchable: their top-level strings and numbers, as
-- app/data/processes.py's search_values writes them for new ones (a number as SQLite renders it).
INSERT OR IGNORE INTO process_search (merchant_id, value, seq)
    SELECT p.merchant_id, lower(trim(j.value)), p.seq FROM processes p, json_each(p.metadata) j
    WHERE j.type IN ('text', 'integer', 'real') AND length(trim(j.value)) BETWEEN 1 AND 200;
