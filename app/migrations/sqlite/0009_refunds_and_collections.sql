-- Version 9 (SQLite): refunds settled only by the merchant's own payment, and collections counted
-- once, at the network's confirmations (docs/payments.md, "Refunds" and "Collecting the funds").

-- A refund's transaction as the merchant names it (POST …/refunds/<id>/transaction, or the console);
-- the block hash of the transfer that settled it; and the kept block (the watcher's chain_blocks)
-- that proved that block canonical: while the kept block stays, so does the transfer's, and when it
-- goes the transfer's block is read again (a completed refund whose transfer left the chain goes
-- back to pending, with refund.reversed).
ALTER TABLE refunds ADD COLUMN named_tx_hash TEXT;
ALTER TABLE refunds ADD COLUMN block_hash TEXT;
ALTER TABLE refunds ADD COLUMN anchor_block INTEGER;
ALTER TABLE refunds ADD COLUMN anchor_hash TEXT;
-- A transaction names one refund (a cancelled refund's name frees it).
CREATE UNIQUE INDEX IF NOT EXISTS refunds_named ON refunds (chain_id, named_tx_hash)
    WHERE named_tx_hash IS NOT NULL AND status != 'cancelled';
CREATE INDEX IF NOT EXISTS refunds_completed ON refunds (network_id, anchor_block)
    WHERE status = 'completed';

-- The factory's version (app/chain/forwarder.py): every factory deployed before this version is
-- the first release's.
ALTER TABLE network_factories ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

-- collections: docs/contract.md's states (pending until mined and `confirmations` deep on the
-- kept chain, then confirmed; reverted when it moved nothing: reverted by the EVM, never mined, or
-- removed by a reorganisation), the block hash and the kept block that proved it, a note (e.g. a
-- gas coin that could not be measured); a nonce may be used by several rows (a replacement, or a
-- transaction a reorganisation removed), so UNIQUE (network_id, sender, nonce) goes. SQLite cannot
-- alter a CHECK or drop a UNIQUE: the table is rebuilt, and collection_items (its only child) with it.
CREATE TABLE collections_v9 (
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
    status           TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'reverted')),
    block_number     INTEGER,                       -- set once mined
    gas_used         INTEGER,
    gas_price        TEXT,                          -- effective, wei
    error            TEXT,                          -- why it is reverted
    created_at       INTEGER NOT NULL,
    settled_at       INTEGER,
    block_hash       TEXT,
    anchor_block     INTEGER,                       -- the kept block that proved it (confirmed)
    anchor_hash      TEXT,
    note             TEXT                           -- e.g. a gas coin that could not be measured
);
INSERT INTO collections_v9 (id, network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx,
                            gas_limit, max_fee_per_gas, status, block_number, gas_used, gas_price,
                            error, created_at, settled_at)
    SELECT id, network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx, gas_limit,
           max_fee_per_gas,
           CASE status WHEN 'sent' THEN 'pending' WHEN 'succeeded' THEN 'confirmed' ELSE 'reverted' END,
           block_number, gas_used, gas_price, error, created_at, settled_at FROM collections;
CREATE TEMPORARY TABLE collection_items_v9 AS SELECT * FROM collection_items;
DROP TABLE collection_items;
DROP TABLE collections;
ALTER TABLE collections_v9 RENAME TO collections;
CREATE INDEX collections_open ON collections (network_id, status);
CREATE INDEX collections_nonce ON collections (network_id, sender, nonce);
-- What one collection moves: per deposit address and token (the gas coin as EIP-7528's
-- 0xEeee…EEeE), the amount read before sending; once mined, what its own logs show it moved.
CREATE TABLE collection_items (
    collection_id    INTEGER NOT NULL REFERENCES collections (id),
    address          TEXT NOT NULL,                 -- the deposit address (EIP-55)
    token            TEXT NOT NULL,
    process_id       TEXT NOT NULL REFERENCES payments (process_id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    payout_address   TEXT NOT NULL,
    amount           TEXT NOT NULL,                 -- base units
    PRIMARY KEY (collection_id, address, token)
);
CREATE INDEX collection_items_merchant ON collection_items (merchant_id);
INSERT INTO collection_items (collection_id, address, token, process_id, merchant_id, payout_address,
                              amount)
    SELECT collection_id, address, token, process_id, merchant_id, payout_address, amount
    FROM collection_items_v9;
DROP TABLE collection_items_v9;
