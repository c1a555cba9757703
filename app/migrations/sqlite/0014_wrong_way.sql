-- Version 14 (SQLite): money that arrives the wrong way (docs/payments.md, "Money that arrives the
-- wrong way"), and how each completion came about (for `reconcile`).

-- An ERC-20 Transfer to a watched deposit address that is not the process's chosen asset on its
-- chosen network (or an earlier choice): another token, the right token on another network of the
-- same mode. Never counted by itself. The first columns are those of `transfers`, with the same
-- life: seen -> confirmed (payment.unexpected, once: reported_at), orphaned or reversed when its
-- block leaves the chain. symbol and decimals: what the contract answered when it was confirmed
-- (NULL: no answer, or not a short printable text / a uint8). Accepted as payment by staff:
-- accepted_at, accepted_by (who: a console user or a secret key) and credited_amount, the base
-- units of the payment's token it counts for (converted exactly from the asset's decimals).
CREATE TABLE IF NOT EXISTS unexpected_transfers (
    chain_id         INTEGER NOT NULL,
    tx_hash          TEXT NOT NULL,
    log_index        INTEGER NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    process_id       TEXT NOT NULL REFERENCES processes (id),
    token_contract   TEXT NOT NULL,                 -- lowercase, as the log gave it
    from_address     TEXT NOT NULL,
    amount           TEXT NOT NULL,                 -- base units of token_contract
    block_number     INTEGER NOT NULL,
    block_hash       TEXT NOT NULL,
    block_timestamp  INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('seen', 'confirmed', 'orphaned', 'reversed')),
    seen_at          INTEGER NOT NULL,
    confirmed_at     INTEGER,
    symbol           TEXT,
    decimals         INTEGER,
    reported_at      INTEGER,
    accepted_at      INTEGER,
    accepted_by      TEXT,
    credited_amount  TEXT,                          -- base units of the payment's token
    PRIMARY KEY (chain_id, tx_hash, log_index)
);
CREATE INDEX IF NOT EXISTS unexpected_process ON unexpected_transfers (process_id);
CREATE INDEX IF NOT EXISTS unexpected_open ON unexpected_transfers (network_id, status, block_number);
-- The watcher reads what changed since its last read on every network of a mode at once.
CREATE INDEX IF NOT EXISTS payments_updated ON payments (updated_at);
CREATE INDEX IF NOT EXISTS payment_choices_created ON payment_choices (created_at);

-- How a completed process came to be completed: 'payment' (its confirmed, or accepted, transfers
-- reached the amount due), 'operator' (`processes complete`, a payment received outside the
-- button), 'sandbox' (a test-mode sandbox payment). NULL: pending, or completed before version 14.
ALTER TABLE processes ADD COLUMN completed_by TEXT
    CHECK (completed_by IN ('payment', 'operator', 'sandbox'));
