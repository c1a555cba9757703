-- Version 12 (PostgreSQL): settling by a chain's finality, and each network's health (docs/payments.md,
-- "Finality" and "Network health").
-- finality: how a transfer counts: 'confirmations' (the count, as before), or once the node's
--   'safe' or 'finalized' block is at or past its block.
-- max_block_age: seconds; a head block older than this makes the network unavailable (NULL: off).
-- polled_at: when the watcher's last successful poll ended; failing_since: the first failed poll
--   after it (NULL while the polls succeed); ok_since: when it was last found available again.
-- head_timestamp: the head block's timestamp at the last good poll; tag_block: the node's block
--   of the finality tag then (NULL under 'confirmations').
ALTER TABLE networks ADD COLUMN IF NOT EXISTS finality TEXT NOT NULL DEFAULT 'confirmations'
    CHECK (finality IN ('confirmations', 'safe', 'finalized'));
ALTER TABLE networks ADD COLUMN IF NOT EXISTS max_block_age BIGINT CHECK (max_block_age > 0);
ALTER TABLE networks ADD COLUMN IF NOT EXISTS polled_at BIGINT;
ALTER TABLE networks ADD COLUMN IF NOT EXISTS failing_since BIGINT;
ALTER TABLE networks ADD COLUMN IF NOT EXISTS ok_since BIGINT;
ALTER TABLE networks ADD COLUMN IF NOT EXISTS head_timestamp BIGINT;
ALTER TABLE networks ADD COLUMN IF NOT EXISTS tag_block BIGINT;
