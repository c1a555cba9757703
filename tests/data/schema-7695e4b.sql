-- The schema of release 7695e4b (sqlite), the last before test and live networks (version 3): its
-- migrations 0001 and 0002 as that release had them, and the schema_version rows its init-db wrote.

-- Version 1 of the schema (SQLite): the schema of the first releases, written idempotently
-- (IF NOT EXISTS) so that init-db brings a database made by any earlier release (which had no
-- schema_version table) to version 1 without touching its rows. Later changes are new numbered
-- files beside this one (app/data/schema.py applies them). Times are integer unix seconds (UTC).
-- Amounts are TEXT holding the exact decimal literal. app/migrations/postgresql/ mirrors it.

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

-- Live payments: stablecoins on EVM networks (docs/payments.md). Amounts in token base units are
-- TEXT holding a decimal integer: 1,000,000 units of an 18-decimal token do not fit in 64 bits.
-- Addresses are stored in their EIP-55 form; tx and block hashes as 0x + lowercase hex.

-- Networks the operator enabled, and the chain watcher's position on each.
CREATE TABLE IF NOT EXISTS networks (
    id               TEXT PRIMARY KEY,              -- the operator's name for it, e.g. "polygon"
    name             TEXT NOT NULL,                 -- shown to customers, e.g. "Polygon PoS"
    chain_id         INTEGER NOT NULL UNIQUE,       -- EIP-155 chain id
    rpc_url          TEXT NOT NULL,                 -- operator-set; may hold a provider's API key: never logged
    confirmations    INTEGER NOT NULL CHECK (confirmations >= 1),
    start_block      INTEGER NOT NULL,              -- first block the watcher reads
    scanned_block    INTEGER NOT NULL,              -- every block up to this one has been read for transfers
    head_block       INTEGER NOT NULL,              -- the chain's head when last asked: confirmations are counted from it
    disabled_at      INTEGER,
    created_at       INTEGER NOT NULL
);

-- Tokens customers may pay with; one asset id (e.g. "usdc") on several networks.
CREATE TABLE IF NOT EXISTS assets (
    id               TEXT NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    symbol           TEXT NOT NULL,
    name             TEXT NOT NULL,
    contract         TEXT NOT NULL,                 -- the ERC-20 contract (EIP-55)
    decimals         INTEGER NOT NULL CHECK (decimals BETWEEN 0 AND 36),
    disabled_at      INTEGER,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (id, network_id),
    UNIQUE (network_id, contract)
);

-- A merchant's account xpub (m/44'/60'/0') and the next address index to give out. The index never
-- goes back, not even when the xpub is replaced: an address is never given to two processes.
CREATE TABLE IF NOT EXISTS merchant_wallets (
    merchant_id      TEXT PRIMARY KEY REFERENCES merchants (id),
    xpub             TEXT NOT NULL,                 -- as sensitive as a customer list: never logged or shown
    next_index       INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);

-- The customer's choice for a live process (made at confirm) and its deposit address
-- m/44'/60'/0'/0/address_index. Paid and pending sums are derived from `transfers`, never stored.
CREATE TABLE IF NOT EXISTS payments (
    process_id       TEXT PRIMARY KEY REFERENCES processes (id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    address_index    INTEGER NOT NULL,
    address          TEXT NOT NULL UNIQUE,
    asset_id         TEXT NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    chain_id         INTEGER NOT NULL,
    token_contract   TEXT NOT NULL,
    decimals         INTEGER NOT NULL,
    amount_due       TEXT NOT NULL,                 -- base units
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (merchant_id, address_index)
);
CREATE INDEX IF NOT EXISTS payments_network ON payments (network_id, token_contract);

-- Token transfers to deposit addresses, each recorded once. `seen`: in a block with fewer than the
-- network's confirmations; `confirmed`: counts towards the payment; `orphaned`: its block left the
-- chain in a reorganisation before it was confirmed (kept for the record, never counted).
CREATE TABLE IF NOT EXISTS transfers (
    chain_id         INTEGER NOT NULL,
    tx_hash          TEXT NOT NULL,
    log_index        INTEGER NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    process_id       TEXT NOT NULL REFERENCES processes (id),
    token_contract   TEXT NOT NULL,
    from_address     TEXT NOT NULL,
    amount           TEXT NOT NULL,                 -- base units
    block_number     INTEGER NOT NULL,
    block_hash       TEXT NOT NULL,
    block_timestamp  INTEGER NOT NULL,              -- unix seconds: paid in time when <= expires_at; the
                                                    -- block's own, or when its scan step's last block was
                                                    -- not after expires_at, that block's (an upper bound)
    status           TEXT NOT NULL CHECK (status IN ('seen', 'confirmed', 'orphaned')),
    seen_at          INTEGER NOT NULL,
    confirmed_at     INTEGER,
    PRIMARY KEY (chain_id, tx_hash, log_index)
);
CREATE INDEX IF NOT EXISTS transfers_process ON transfers (process_id);
CREATE INDEX IF NOT EXISTS transfers_open ON transfers (network_id, status, block_number);

-- Hashes of the recent blocks the watcher has read (at least the unconfirmed window), to notice a
-- reorganisation: a stored hash that the node no longer returns for that number.
CREATE TABLE IF NOT EXISTS chain_blocks (
    network_id       TEXT NOT NULL REFERENCES networks (id),
    number           INTEGER NOT NULL,
    hash             TEXT NOT NULL,
    parent_hash      TEXT NOT NULL,
    timestamp        INTEGER NOT NULL,
    PRIMARY KEY (network_id, number)
);

-- Retention (app/data/maintenance.py): final events are pruned oldest first by creation time; the
-- pruned ones are counted here by status, so the delivery totals of /metrics never go down.
CREATE INDEX IF NOT EXISTS events_created ON events (created_at);
CREATE TABLE IF NOT EXISTS pruned_events (
    status           TEXT PRIMARY KEY CHECK (status IN ('delivered', 'failed', 'no_endpoint')),
    count            INTEGER NOT NULL
);

-- Version 2 (SQLite): the earlier choices of a payment. A customer who changes the asset or network
-- (same deposit address) may already have paid with the earlier one: the watcher keeps watching
-- the address for it, and such a transfer counts in the current asset's units (docs/payments.md).
CREATE TABLE IF NOT EXISTS payment_choices (
    process_id       TEXT NOT NULL REFERENCES payments (process_id),
    network_id       TEXT NOT NULL REFERENCES networks (id),
    token_contract   TEXT NOT NULL,                 -- EIP-55, as in payments
    decimals         INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,              -- when the customer left this choice
    PRIMARY KEY (process_id, network_id, token_contract)
);
CREATE INDEX IF NOT EXISTS payment_choices_network ON payment_choices (network_id);

CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL);
INSERT INTO schema_version (version, name, applied_at) VALUES (1, '0001_initial.sql', 1795000000);
INSERT INTO schema_version (version, name, applied_at) VALUES (2, '0002_payment_choices.sql', 1795000000);
