-- Version 25 (PostgreSQL): the deposit addresses the chain watcher looks for, kept apart, so its full
-- read is one narrow table's rows instead of a lookup of payments and earlier choices per watched
-- process (app/data/transfers.py watched_addresses).
-- watch_list: one row per (process, network, token) its payment chose or chose earlier, written with
--   the payment and with each change of choice; deleted by the delivery worker's chores once its
--   process became final longer ago than PAYMENT_MONITORING_SECONDS (watch_list_expiry finds the
--   candidates: a process expires before, or soon after, it became final). A row not yet pruned
--   is harmless: the watcher checks what it records against the process (transfers.final_before).
--   Filled here from the payments of processes pending or final within 30 days (migrate.py).
-- processes_final_updated served the read this replaces.
CREATE TABLE IF NOT EXISTS watch_list (
    process_id      TEXT NOT NULL,
    network_id      TEXT NOT NULL,
    token_contract  TEXT NOT NULL,                 -- lowercase, as Transfer logs are compared
    address         TEXT NOT NULL,                 -- lowercase
    livemode        SMALLINT NOT NULL,               -- the process's
    expires_at      BIGINT NOT NULL,               -- the process's
    PRIMARY KEY (process_id, network_id, token_contract)
);
CREATE INDEX IF NOT EXISTS watch_list_expiry ON watch_list (expires_at);
DROP INDEX IF EXISTS processes_final_updated;
