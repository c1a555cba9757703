-- Version 12 (SQLite): settling by a chain's finality, and each network's health (docs/payments.md,
-- "Finality" and "Network health").
-- finality: how a transfer counts: 'confirmations' (the count, as before), or once the node's
--   'safe' or 'finalized' block is at or past its block.
-- max_block_age: seconds; a head block older than this makes the network unavailable (NULL: off).
-- polled_at: when the watcher's last successful poll ended; failing_since: the first failed poll
--   after it (NULL while the polls succeed); ok_since: when it was last found available again.
-- head_timestamp: the head block's timestamp at the last good poll; tag_block: the node's block
--   of the finality tag then (NULL under 'confirmations').
ALTER TABLE networks ADD COLUMN finality TEXT NOT NULL DEFAULT 'confirmations'
    CHECK (finality IN ('confirmations', 'safe', 'finalized'));
ALTER TABLE networks ADD COLUMN max_block_age INTEGER CHECK (max_block_age > 0);
ALTER TABLE networks ADD COLUMN polled_at INTEGER;
ALTER TABLE networks ADD COLUMN failing_since INTEGER;
ALTER TABLE networks ADD COLUMN ok_since INTEGER;
ALTER TABLE networks ADD COLUMN head_timestamp INTEGER;
ALTER TABLE networks ADD COLUMN tag_block INTEGER;
