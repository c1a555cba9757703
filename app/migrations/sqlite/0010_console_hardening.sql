-- Version 10 (SQLite): the console under attack (docs/console.md).

-- The lock-out counts password checks: a row is written before each check and kept when it fails.
-- `protected` marks the rows of a user's email, never evicted by the cap on the others; the
-- indexes let each login prune expired rows and ended locks in small steps.
ALTER TABLE login_failures ADD COLUMN protected INTEGER NOT NULL DEFAULT 0 CHECK (protected IN (0, 1));
CREATE INDEX IF NOT EXISTS login_failures_age ON login_failures (failed_at);
CREATE INDEX IF NOT EXISTS login_locks_until ON login_locks (locked_until);

-- A test event ("Send test event", webhook.test) goes through the outbox like every event, so the
-- delivery worker sends it and no web worker waits on the merchant's endpoint: it has no process.
-- SQLite cannot drop a NOT NULL: the table is copied into a new one with the same columns, in the
-- same order. Its children's references are checked at COMMIT (deferred): the copy puts every
-- parent row back before then.
PRAGMA defer_foreign_keys = ON;
CREATE TABLE events_v10 AS SELECT * FROM events;
DROP TABLE events;
CREATE TABLE events (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,         -- "evt_" + 32 hex: the webhook-id
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    process_id       TEXT REFERENCES processes (id),  -- NULL: a test event
    type             TEXT NOT NULL,
    payload          TEXT NOT NULL,                -- the exact body sent on every attempt
    created_at       INTEGER NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed', 'no_endpoint')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,                      -- NULL when nothing is scheduled
    lease_owner      TEXT,                         -- worker holding the event, if any
    lease_expires_at INTEGER,                      -- a lease past this time is void
    last_error       TEXT,
    delivered_at     INTEGER
);
INSERT INTO events SELECT * FROM events_v10 ORDER BY seq;
DROP TABLE events_v10;
CREATE INDEX events_due ON events (status, next_attempt_at);
CREATE INDEX events_merchant ON events (merchant_id, seq);
CREATE INDEX events_process ON events (process_id);
CREATE INDEX events_created ON events (created_at);
-- At most one test event of a merchant waits at a time: a console cannot queue a flood of them.
CREATE UNIQUE INDEX IF NOT EXISTS events_one_pending_test ON events (merchant_id)
    WHERE process_id IS NULL AND status = 'pending';
