-- Version 23 (PostgreSQL): one active watcher per network (docs/storage.md, "Several watchers").
-- watcher_leases: per network, the `watch-payments` process that polls it (`owner`, a token of its
--   own) until `expires_at` (unix seconds by the database server's clock, one clock for every host).
--   Its holder renews it each poll and in every transaction a poll writes, holding the row until
--   that transaction ends; another watcher takes the row over once it has expired.
CREATE TABLE IF NOT EXISTS watcher_leases (
    network_id  TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL,
    since       DOUBLE PRECISION NOT NULL  -- when this owner took it
);
