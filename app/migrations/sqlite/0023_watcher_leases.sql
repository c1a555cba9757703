-- Version 23 (SQLite): one active watcher per network (docs/storage.md, "Several watchers").
-- watcher_leases: per network, the `watch-payments` process that polls it (`owner`, a token of its
--   own) until `expires_at` (unix seconds by the database's clock). Its holder renews it each poll
--   and in every transaction a poll writes; another watcher takes the row over once it has expired.
CREATE TABLE IF NOT EXISTS watcher_leases (
    network_id  TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    expires_at  REAL NOT NULL,
    since       REAL NOT NULL      -- when this owner took it (the log says how long it has held it)
);
