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
