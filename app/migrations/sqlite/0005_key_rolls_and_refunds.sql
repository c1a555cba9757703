-- Version 5 (SQLite): rolled credentials that keep working for an overlap, and refunds.

-- A rolled secret key works until expires_at (then answers 401 like a revoked one); NULL: no end.
ALTER TABLE secret_keys ADD COLUMN expires_at INTEGER;

-- A rolled webhook secret keeps signing beside the new one until previous_webhook_secret_until.
ALTER TABLE merchants ADD COLUMN previous_webhook_secret TEXT;
ALTER TABLE merchants ADD COLUMN previous_webhook_secret_until INTEGER;

-- A refund the merchant pays from its own wallet to the customer's address, in the payment's token
-- on the payment's network; the chain watcher settles it (app/chain/refunds.py).
CREATE TABLE IF NOT EXISTS refunds (
    seq              INTEGER PRIMARY KEY,           -- insertion order: the list's order
    id               TEXT NOT NULL UNIQUE,          -- "rf_" + 32 hex
    process_id       TEXT NOT NULL REFERENCES processes (id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'cancelled')),
    asset_id         TEXT NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    chain_id         INTEGER NOT NULL,
    token_contract   TEXT NOT NULL,                 -- EIP-55
    decimals         INTEGER NOT NULL,
    amount           TEXT NOT NULL,                 -- base units, decimal-integer text
    address          TEXT NOT NULL,                 -- the customer's, EIP-55
    reason           TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    scanned_block    INTEGER NOT NULL,              -- blocks up to this one were searched for its transfer
    tx_hash          TEXT,                          -- the settling transfer (completed only)
    log_index        INTEGER,
    block_number     INTEGER,
    block_timestamp  INTEGER,
    transfer_amount  TEXT                           -- base units
);
CREATE INDEX IF NOT EXISTS refunds_process ON refunds (process_id);
CREATE INDEX IF NOT EXISTS refunds_pending ON refunds (network_id) WHERE status = 'pending';
-- One transfer settles one refund.
CREATE UNIQUE INDEX IF NOT EXISTS refunds_transfer ON refunds (chain_id, tx_hash, log_index)
    WHERE tx_hash IS NOT NULL;
