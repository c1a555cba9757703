-- Version 13 (PostgreSQL): the console's overview and history (docs/console.md, "The overview"): indexes,
-- none on processes (a preorder writes what it wrote before), and the browser wallet's collections.
-- What was paid in a window: the confirmed transfers by when they were confirmed (written by the
-- watcher only, once per transfer).
CREATE INDEX IF NOT EXISTS transfers_confirmed ON transfers (confirmed_at) WHERE status = 'confirmed';
-- A merchant's refunds by state and time (the overview's refunds, the list's "refunded" filter).
CREATE INDEX IF NOT EXISTS refunds_merchant ON refunds (merchant_id, status, updated_at);
-- Whether a deposit address's token was collected after a transfer arrived.
CREATE INDEX IF NOT EXISTS collection_items_address ON collection_items (address, token);
-- A merchant's events of a type by time (the overview's partly paid, the webhooks page's filter).
CREATE INDEX IF NOT EXISTS events_merchant_type ON events (merchant_id, type, created_at);
-- A collection sent from a merchant's browser wallet on the console's payouts page: recorded by
-- the transaction hash the page received, for that merchant (NULL: one of `collect`'s own), then
-- settled from its receipt as `collect` settles its own (app/dashboard/payouts.py).
ALTER TABLE collections ADD COLUMN IF NOT EXISTS recorded_by TEXT REFERENCES merchants (id);
CREATE INDEX IF NOT EXISTS collections_recorded_by ON collections (recorded_by) WHERE recorded_by IS NOT NULL;
