-- Version 15 (SQLite): what the relayer needs to never charge a payer twice nor pay what the
-- operator did not allow (docs/payments.md, "Payments without gas").
-- networks.max_fee_per_gas: the operator's ceiling on a transaction's maxFeePerGas on the network,
--   in wei (`networks set-max-fee`; NULL: none). The relayer and `collect` send nothing above it.
-- relayed_authorizations.raw_tx: the signed transaction, kept to broadcast again a relay that a
--   node lost (it stays in flight until it can no longer move funds).
ALTER TABLE networks ADD COLUMN max_fee_per_gas INTEGER CHECK (max_fee_per_gas > 0);
ALTER TABLE relayed_authorizations ADD COLUMN raw_tx TEXT;
-- A payer's relays: what is in flight from it (its balance is reserved for them), and its hourly count.
CREATE INDEX IF NOT EXISTS relayed_from ON relayed_authorizations (from_address, created_at);
