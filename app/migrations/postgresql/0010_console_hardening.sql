-- Version 10 (PostgreSQL): the console under attack (docs/console.md). Idempotent.

-- The lock-out counts password checks: a row is written before each check and kept when it fails.
-- `protected` marks the rows of a user's email, never evicted by the cap on the others; the
-- indexes let each login prune expired rows and ended locks in small steps.
ALTER TABLE login_failures ADD COLUMN IF NOT EXISTS protected SMALLINT NOT NULL DEFAULT 0
    CHECK (protected IN (0, 1));
CREATE INDEX IF NOT EXISTS login_failures_age ON login_failures (failed_at);
CREATE INDEX IF NOT EXISTS login_locks_until ON login_locks (locked_until);

-- A test event ("Send test event", webhook.test) goes through the outbox like every event, so the
-- delivery worker sends it and no web worker waits on the merchant's endpoint: it has no process.
ALTER TABLE events ALTER COLUMN process_id DROP NOT NULL;
-- At most one test event of a merchant waits at a time: a console cannot queue a flood of them.
CREATE UNIQUE INDEX IF NOT EXISTS events_one_pending_test ON events (merchant_id)
    WHERE process_id IS NULL AND status = 'pending';
