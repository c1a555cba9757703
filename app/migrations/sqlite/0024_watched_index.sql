-- Version 24 (SQLite): the watcher's full read of what it watches served by indexes, whatever the
-- number of processes (app/data/transfers.py watched_addresses): the pending ones through
-- processes_status_expiry, the final ones updated within the monitoring window through this one.
-- Partial: a new process (pending) adds nothing to it, so a preorder writes no more than before.
CREATE INDEX IF NOT EXISTS processes_final_updated ON processes (livemode, updated_at)
    WHERE status <> 'pending';
