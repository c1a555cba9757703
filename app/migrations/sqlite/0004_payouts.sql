-- Version 4 (SQLite): the payout mode (docs/payments.md, "Collecting the funds"). A merchant may give
-- a payout address instead of an xpub; each network that offers the mode has a forwarder factory;
-- a payout-mode payment's deposit address is the factory's CREATE2 address for (payout, process), so
-- the payment keeps the payout address and factory it was made for; collections record each
-- transaction that moved deposits to their payouts.

CREATE TABLE IF NOT EXISTS merchant_payouts (
    merchant_id      TEXT PRIMARY KEY REFERENCES merchants (id),
    payout_address   TEXT NOT NULL,                 -- EIP-55
    updated_at       INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS network_factories (
    network_id       TEXT PRIMARY KEY REFERENCES networks (id),
    address          TEXT NOT NULL,                 -- EIP-55
    tx_hash          TEXT,                          -- deploy-factory's transaction (NULL: set-factory)
    created_at       INTEGER NOT NULL
);

-- payments: address_index becomes NULL for payout-mode payments (their address is not an HD child),
-- and three columns say which mode, payout address and factory the deposit address was made for.
-- SQLite cannot drop a NOT NULL: the table is rebuilt, and payment_choices (its only child) with it.
CREATE TABLE payments_v4 (
    process_id       TEXT PRIMARY KEY REFERENCES processes (id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    address_index    INTEGER,                       -- xpub mode: m/44'/60'/0'/0/address_index
    address          TEXT NOT NULL UNIQUE,
    asset_id         TEXT NOT NULL,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    chain_id         INTEGER NOT NULL,
    token_contract   TEXT NOT NULL,
    decimals         INTEGER NOT NULL,
    amount_due       TEXT NOT NULL,                 -- base units
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    mode             TEXT NOT NULL DEFAULT 'xpub',
    payout_address   TEXT,                          -- payout mode: where this address's funds go
    factory          TEXT,                          -- payout mode: the factory of the CREATE2 address
    UNIQUE (merchant_id, address_index),
    CHECK ((mode = 'xpub' AND address_index IS NOT NULL AND payout_address IS NULL AND factory IS NULL)
        OR (mode = 'payout' AND address_index IS NULL AND payout_address IS NOT NULL
            AND factory IS NOT NULL))
);
INSERT INTO payments_v4 (process_id, merchant_id, address_index, address, asset_id, network_id,
                         chain_id, token_contract, decimals, amount_due, created_at, updated_at)
    SELECT process_id, merchant_id, address_index, address, asset_id, network_id, chain_id,
           token_contract, decimals, amount_due, created_at, updated_at FROM payments;
CREATE TEMPORARY TABLE payment_choices_v4 AS SELECT * FROM payment_choices;
DROP TABLE payment_choices;
DROP TABLE payments;
ALTER TABLE payments_v4 RENAME TO payments;
CREATE INDEX payments_network ON payments (network_id, token_contract);
CREATE TABLE payment_choices (
    process_id       TEXT NOT NULL REFERENCES payments (process_id),
    network_id       TEXT NOT NULL REFERENCES networks (id),
    token_contract   TEXT NOT NULL,                 -- EIP-55, as in payments
    decimals         INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,              -- when the customer left this choice
    PRIMARY KEY (process_id, network_id, token_contract)
);
CREATE INDEX payment_choices_network ON payment_choices (network_id);
INSERT INTO payment_choices (process_id, network_id, token_contract, decimals, created_at)
    SELECT process_id, network_id, token_contract, decimals, created_at FROM payment_choices_v4;
DROP TABLE payment_choices_v4;
CREATE INDEX payments_payout ON payments (mode, factory);

-- One transaction of `collect`: recorded (signed, with its hash) before it is broadcast, so a run
-- interrupted after broadcasting is settled by the next run from its receipt. `sent` until then;
-- `succeeded` (status 1), `failed` (reverted, or never mined and its nonce used by another).
CREATE TABLE IF NOT EXISTS collections (
    id               INTEGER PRIMARY KEY,
    network_id       TEXT NOT NULL REFERENCES networks (id),
    chain_id         INTEGER NOT NULL,
    factory          TEXT NOT NULL,
    sender           TEXT NOT NULL,                 -- the gas payer (EIP-55)
    nonce            INTEGER NOT NULL,
    tx_hash          TEXT NOT NULL UNIQUE,
    raw_tx           TEXT NOT NULL,                 -- the signed transaction, broadcast again if lost
    gas_limit        INTEGER NOT NULL,
    max_fee_per_gas  TEXT NOT NULL,                 -- wei
    status           TEXT NOT NULL CHECK (status IN ('sent', 'succeeded', 'failed')),
    block_number     INTEGER,
    gas_used         INTEGER,
    gas_price        TEXT,                          -- effective, wei
    error            TEXT,
    created_at       INTEGER NOT NULL,
    settled_at       INTEGER,
    UNIQUE (network_id, sender, nonce)
);
CREATE INDEX IF NOT EXISTS collections_open ON collections (network_id, status);

-- What one collection moves: per deposit address and token (the gas coin as EIP-7528's
-- 0xEeee…EEeE), the amount read before sending; once succeeded, the amount the receipt shows moved.
CREATE TABLE IF NOT EXISTS collection_items (
    collection_id    INTEGER NOT NULL REFERENCES collections (id),
    address          TEXT NOT NULL,                 -- the deposit address (EIP-55)
    token            TEXT NOT NULL,
    process_id       TEXT NOT NULL REFERENCES payments (process_id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    payout_address   TEXT NOT NULL,
    amount           TEXT NOT NULL,                 -- base units
    PRIMARY KEY (collection_id, address, token)
);
CREATE INDEX IF NOT EXISTS collection_items_merchant ON collection_items (merchant_id);
