-- Version 3 (SQLite): test networks, and transfers reversed by a deep reorganisation.
--
-- networks.testnet: the operator's `networks add --testnet`. A network is a test network when this
-- is set OR its chain id is a well-known test chain's (app/chain/testnets.py): the networks an
-- earlier release added keep 0 here and are classed by their chain id alone (docs/payments.md).
ALTER TABLE networks ADD COLUMN testnet INTEGER NOT NULL DEFAULT 0 CHECK (testnet IN (0, 1));

-- transfers.status gains `reversed`: a transfer that had counted (confirmed) left the chain in a
-- reorganisation deeper than the confirmation depth (payment.reversed). SQLite cannot alter a
-- CHECK constraint: the table is copied into a new one with the same columns, in the same order.
CREATE TABLE transfers_v3 (
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
    -- seen: fewer than the network's confirmations; confirmed: counts towards the payment;
    -- orphaned: its block left the chain before it confirmed (never counted); reversed: its block
    -- left the chain after it had confirmed (no longer counted). Orphaned and reversed rows are
    -- kept for the record; the same transaction included again in another block revives its row.
    status           TEXT NOT NULL CHECK (status IN ('seen', 'confirmed', 'orphaned', 'reversed')),
    seen_at          INTEGER NOT NULL,
    confirmed_at     INTEGER,
    PRIMARY KEY (chain_id, tx_hash, log_index)
);
INSERT INTO transfers_v3 SELECT chain_id, tx_hash, log_index, network_id, process_id, token_contract,
    from_address, amount, block_number, block_hash, block_timestamp, status, seen_at, confirmed_at
    FROM transfers;
DROP TABLE transfers;
ALTER TABLE transfers_v3 RENAME TO transfers;
CREATE INDEX transfers_process ON transfers (process_id);
CREATE INDEX transfers_open ON transfers (network_id, status, block_number);
