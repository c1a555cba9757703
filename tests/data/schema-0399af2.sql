-- Schema of the payment preorder service (SQLite).
-- Every statement is idempotent (IF NOT EXISTS): `flask --app app init-db` may run any number of
-- times and only creates what is missing. `init-db --reset` drops the tables first (see app/db.py).
-- Times are integer unix seconds (UTC). Amounts are TEXT holding the exact decimal literal.

CREATE TABLE IF NOT EXISTS merchants (
    id              TEXT PRIMARY KEY,              -- "mer_" + 24 hex
    name            TEXT NOT NULL,
    livemode        INTEGER NOT NULL CHECK (livemode IN (0, 1)),
    public_key      TEXT NOT NULL UNIQUE,          -- pk_test_/pk_live_: public by design
    webhook_secret  TEXT NOT NULL,                 -- whsec_...: needed in clear to sign
    webhook_url     TEXT,                          -- NULL: events are kept, marked no_endpoint
    disabled_at     INTEGER,
    created_at      INTEGER NOT NULL
);

-- Secret keys: several per merchant (rotation); only the SHA-256 of the key is stored.
CREATE TABLE IF NOT EXISTS secret_keys (
    id              INTEGER PRIMARY KEY,
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    key_hash        TEXT NOT NULL UNIQUE,          -- hex SHA-256 of the whole key
    key_prefix      TEXT NOT NULL,                 -- first 20 characters, to tell keys apart
    created_at      INTEGER NOT NULL,
    revoked_at      INTEGER
);
CREATE INDEX IF NOT EXISTS secret_keys_merchant ON secret_keys (merchant_id);

CREATE TABLE IF NOT EXISTS processes (
    seq             INTEGER PRIMARY KEY,           -- insertion order: newest first = seq DESC
    id              TEXT NOT NULL UNIQUE,          -- the processId (UUID 4, lowercase)
    merchant_id     TEXT NOT NULL REFERENCES merchants (id),
    status          TEXT NOT NULL
                    CHECK (status IN ('pending', 'completed', 'cancelled', 'expired')),
    amount          TEXT NOT NULL,                 -- exact decimal literal, e.g. '19.99'
    metadata        TEXT NOT NULL,                 -- compact UTF-8 JSON, key order as given
    livemode        INTEGER NOT NULL CHECK (livemode IN (0, 1)),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS processes_merchant_seq ON processes (merchant_id, seq);
CREATE INDEX IF NOT EXISTS processes_status_expiry ON processes (status, expires_at);

-- The outbox: one row per webhook event, written in the same transaction as the change it reports.
CREATE TABLE IF NOT EXISTS events (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,         -- "evt_" + 32 hex: the webhook-id
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    process_id       TEXT NOT NULL REFERENCES processes (id),
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
CREATE INDEX IF NOT EXISTS events_due ON events (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS events_merchant ON events (merchant_id, seq);
CREATE INDEX IF NOT EXISTS events_process ON events (process_id);

CREATE TABLE IF NOT EXISTS delivery_attempts (
    id               INTEGER PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id),
    attempted_at     INTEGER NOT NULL,
    url              TEXT,
    status_code      INTEGER,                      -- NULL when no HTTP answer
    error            TEXT,                         -- NULL on success
    duration_ms      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS delivery_attempts_event ON delivery_attempts (event_id, id);

-- Idempotency-Key records: the first 200 response for (merchant, key), replayed for 24 h.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    key              TEXT NOT NULL,
    request_hash     TEXT NOT NULL,                -- SHA-256 of the canonical request
    process_id       TEXT NOT NULL REFERENCES processes (id),
    response_body    TEXT NOT NULL,                -- the first response, replayed byte for byte
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_at);
