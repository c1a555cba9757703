-- Version 13 (PostgreSQL): the console's overview and history (docs/console.md, "The overview"). Indexes only;
-- none on processes, so a preorder writes what it wrote before.
-- What was paid in a window: the confirmed transfers by when they were confirmed (written by the
-- watcher only, once per transfer).
CREATE INDEX IF NOT EXISTS transfers_confirmed ON transfers (confirmed_at) WHERE status = 'confirmed';
-- A merchant's refunds by state and time (the overview's refunds, the list's "refunded" filter).
CREATE INDEX IF NOT EXISTS refunds_merchant ON refunds (merchant_id, status, updated_at);
-- Whether a deposit address's token was collected after a transfer arrived.
CREATE INDEX IF NOT EXISTS collection_items_address ON collection_items (address, token);
-- A merchant's events of a type by time (the overview's partly paid, the webhooks page's filter).
CREATE INDEX IF NOT EXISTS events_merchant_type ON events (merchant_id, type, created_at);
