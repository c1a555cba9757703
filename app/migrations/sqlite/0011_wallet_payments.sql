-- Version 11 (SQLite): paying from the browser wallet (docs/payments.md, "Paying from the browser
-- wallet"): assets paid without gas (ERC-3009), the transactions the relayer sent for them, and the
-- merchant's underpayment tolerance.

-- An asset added with --eip3009: its EIP-712 domain's name and version, read from the contract and
-- checked against its DOMAIN_SEPARATOR() (NULL: the asset is never offered without gas).
ALTER TABLE assets ADD COLUMN eip3009_name TEXT;
ALTER TABLE assets ADD COLUMN eip3009_version TEXT;

-- The underpayment tolerance, in percent (exact decimal text, 0 to 5): the merchant's setting, and
-- the one each payment was confirmed under (the setting at its first confirm: it never changes after).
ALTER TABLE merchants ADD COLUMN underpayment_tolerance TEXT NOT NULL DEFAULT '0';
ALTER TABLE payments ADD COLUMN tolerance TEXT NOT NULL DEFAULT '0';

-- Each ERC-3009 authorization the relayer submitted (or began to). `sending`: the relayer is between
-- taking its turn and the node's answer (at most one row at a time: the relayer's nonce is taken
-- from the node inside that turn); `sent`: broadcast; `dropped`: the node refused it, nothing went
-- out. `final_at`: no longer in flight (mined, used, expired or dropped); one row in flight per
-- process. Rows of the last hour with a transaction count against RELAYER_MAX_PER_HOUR.
CREATE TABLE IF NOT EXISTS relayed_authorizations (
    id               INTEGER PRIMARY KEY,
    process_id       TEXT NOT NULL REFERENCES processes (id),
    network_id       TEXT NOT NULL REFERENCES networks (id),
    token_contract   TEXT NOT NULL,                 -- EIP-55
    from_address     TEXT NOT NULL,                 -- EIP-55: the payer
    value            TEXT NOT NULL,                 -- base units
    valid_before     INTEGER NOT NULL,
    nonce            TEXT NOT NULL,                 -- the authorization's 0x nonce (32 bytes)
    state            TEXT NOT NULL CHECK (state IN ('sending', 'sent', 'dropped')),
    tx_hash          TEXT,
    relayer_nonce    INTEGER,
    created_at       INTEGER NOT NULL,
    final_at         INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS relayed_in_flight ON relayed_authorizations (process_id)
    WHERE final_at IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS relayed_one_sending ON relayed_authorizations (state)
    WHERE state = 'sending';
CREATE INDEX IF NOT EXISTS relayed_created ON relayed_authorizations (created_at);
