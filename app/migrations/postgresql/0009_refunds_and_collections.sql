-- Version 9 (PostgreSQL): refunds settled only by the merchant's own payment, and collections counted
-- once, at the network's confirmations (docs/payments.md, "Refunds" and "Collecting the funds").
-- The SQLite file beside this one says what each change is for. Written to be applied again over a
-- schema that has it (a database whose schema_version was lost): IF NOT EXISTS, and the status
-- mapping leaves the new states as they are.

ALTER TABLE refunds ADD COLUMN IF NOT EXISTS named_tx_hash TEXT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS block_hash TEXT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS anchor_block BIGINT;
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS anchor_hash TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS refunds_named ON refunds (chain_id, named_tx_hash)
    WHERE named_tx_hash IS NOT NULL AND status != 'cancelled';
CREATE INDEX IF NOT EXISTS refunds_completed ON refunds (network_id, anchor_block)
    WHERE status = 'completed';

ALTER TABLE network_factories ADD COLUMN IF NOT EXISTS version INTEGER NOT NULL DEFAULT 1;

ALTER TABLE collections DROP CONSTRAINT IF EXISTS collections_status_check;
ALTER TABLE collections DROP CONSTRAINT IF EXISTS collections_network_id_sender_nonce_key;
UPDATE collections SET status = CASE status WHEN 'sent' THEN 'pending' WHEN 'succeeded' THEN 'confirmed'
                                            WHEN 'failed' THEN 'reverted' ELSE status END;
ALTER TABLE collections ADD CONSTRAINT collections_status_check
    CHECK (status IN ('pending', 'confirmed', 'reverted'));
ALTER TABLE collections ADD COLUMN IF NOT EXISTS block_hash TEXT;
ALTER TABLE collections ADD COLUMN IF NOT EXISTS anchor_block BIGINT;
ALTER TABLE collections ADD COLUMN IF NOT EXISTS anchor_hash TEXT;
ALTER TABLE collections ADD COLUMN IF NOT EXISTS note TEXT;
CREATE INDEX IF NOT EXISTS collections_nonce ON collections (network_id, sender, nonce);
