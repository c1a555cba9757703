-- Version 25 (SQLite): the deposit addresses the chain watcher looks for, kept apart, so its full
-- read is one narrow table's rows instead of a lookup of payments and earlier choices per watched
-- process (app/data/transfers.py watched_addresses).
-- watch_list: one row per (process, network, token) its payment chose or chose earlier, written by
--   the triggers below when a pending process's payment is made or changes its choice, whatever
--   writes it; deleted by the delivery worker's chores once its process became final longer ago
--   than PAYMENT_MONITORING_SECONDS (watch_list_expiry finds the candidates: a process expires
--   before, or soon after, it became final). A row not yet deleted is harmless: the watcher checks
--   what it records against the process (transfers.final_before). Filled by migrate.py from the
--   payments of processes pending or final within the monitoring window (30 days at least).
-- processes_final_updated served the read this replaces.
CREATE TABLE IF NOT EXISTS watch_list (
    process_id      TEXT NOT NULL,
    network_id      TEXT NOT NULL,
    token_contract  TEXT NOT NULL,                 -- lowercase, as Transfer logs are compared
    address         TEXT NOT NULL,                 -- lowercase
    livemode        INTEGER NOT NULL,               -- the process's
    expires_at      INTEGER NOT NULL,               -- the process's
    PRIMARY KEY (process_id, network_id, token_contract)
);
CREATE INDEX IF NOT EXISTS watch_list_expiry ON watch_list (expires_at);
DROP INDEX IF EXISTS processes_final_updated;
CREATE TRIGGER IF NOT EXISTS payments_watched AFTER INSERT ON payments BEGIN
    INSERT OR IGNORE INTO watch_list (process_id, network_id, token_contract, address, livemode,
                                      expires_at)
        SELECT NEW.process_id, NEW.network_id, lower(NEW.token_contract), lower(NEW.address),
               livemode, expires_at
        FROM processes WHERE id = NEW.process_id AND status = 'pending';
END;
CREATE TRIGGER IF NOT EXISTS payments_rewatched AFTER UPDATE OF network_id, token_contract
    ON payments BEGIN
    INSERT OR IGNORE INTO watch_list (process_id, network_id, token_contract, address, livemode,
                                      expires_at)
        SELECT NEW.process_id, NEW.network_id, lower(NEW.token_contract), lower(NEW.address),
               livemode, expires_at
        FROM processes WHERE id = NEW.process_id AND status = 'pending';
END;
