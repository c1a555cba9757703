-- Version 7 (PostgreSQL): the chain watcher reads the payments made or changed since its last poll
-- (app/data/transfers.py, watched_since); these indexes make that read touch the new rows only,
-- whatever the number of payments. Idempotent (IF NOT EXISTS).
CREATE INDEX IF NOT EXISTS payments_network_updated ON payments (network_id, updated_at);
CREATE INDEX IF NOT EXISTS payment_choices_network_created ON payment_choices (network_id, created_at);
