-- Version 20 (PostgreSQL): what the console's overview sums, kept current as it happens (docs/console.md,
-- "The overview"): per merchant, kind, day and key, a count and an exact sum, written in the same
-- transaction as the change it counts (app/data/rollups.py), so a view reads 30 days of rows instead
-- of summing history. Kinds: `final` (processes by the day they were created, key: the final status
-- they reached), `completed` and `sandbox` (completed processes, and those completed without a live
-- payment, by the day they completed; key: currency; amount in it), `paid` (confirmed transfers by
-- the day they were confirmed, less reversed ones; key: network and token; base units), `refunded`
-- (completed refunds; key: asset and decimals; base units). init-db builds it from the rows already
-- there (app/data/rollups.py rebuild).
CREATE TABLE IF NOT EXISTS overview_days (
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    kind             TEXT NOT NULL CHECK (kind IN ('final', 'completed', 'sandbox', 'paid', 'refunded')),
    day              BIGINT NOT NULL,               -- unix time / 86400 (UTC)
    key              TEXT NOT NULL,
    count            BIGINT NOT NULL,
    amount           TEXT NOT NULL,                 -- exact decimal text
    PRIMARY KEY (merchant_id, kind, day, key)
);
