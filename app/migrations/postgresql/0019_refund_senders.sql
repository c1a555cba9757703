-- Version 19 (PostgreSQL): who paid a refund, who named its transaction, and why a name was
-- cleared; a transaction is "already named" only among one merchant's refunds (docs/payments.md,
-- "Refunds"). The SQLite file beside this one says what each column is for. Written to be applied
-- again over a schema that has it (IF NOT EXISTS; the index is made again per merchant).
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS sender TEXT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS named_by TEXT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS cleared_tx_hash TEXT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS cleared_reason TEXT;
DROP INDEX IF EXISTS refunds_named;
CREATE UNIQUE INDEX IF NOT EXISTS refunds_named ON refunds (merchant_id, chain_id, named_tx_hash)
    WHERE named_tx_hash IS NOT NULL AND status != 'cancelled';
