-- Version 22 (SQLite): several webhook endpoints per merchant. An event is written once; it fans
-- out into one delivery per endpoint that was enabled and subscribed to its type when it was made,
-- and each delivery has its own attempts, schedule, lease and state (app/data/outbox.py).

CREATE TABLE IF NOT EXISTS webhook_endpoints (
    seq                   INTEGER PRIMARY KEY,     -- creation order: a merchant's list is oldest first
    id                    TEXT NOT NULL UNIQUE,    -- "we_" + 24 hex
    merchant_id           TEXT NOT NULL REFERENCES merchants (id),
    url                   TEXT NOT NULL,
    events                TEXT NOT NULL,           -- '*', or the subscribed types joined by ','
    enabled               INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    description           TEXT,
    secret                TEXT NOT NULL,           -- whsec_...: needed in clear to sign
    previous_secret       TEXT,                    -- the rolled one, signing too until _until
    previous_secret_until INTEGER,
    created_at            INTEGER NOT NULL,
    deleted_at            INTEGER                  -- deleted: kept for its deliveries' history
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_merchant ON webhook_endpoints (merchant_id, seq);

-- Each merchant's URL and secret become its first endpoint, subscribed to every event. Its id is
-- made from the merchant's, so an upgrade gives the same on either backend.
INSERT INTO webhook_endpoints (id, merchant_id, url, events, enabled, secret, previous_secret,
                               previous_secret_until, created_at)
SELECT 'we_' || substr(id, 5), id, webhook_url, '*', 1, webhook_secret, previous_webhook_secret,
       previous_webhook_secret_until, created_at
FROM merchants WHERE webhook_url IS NOT NULL ORDER BY created_at, id;
-- A merchant whose URL was removed after events were sent to it: a disabled endpoint at the last
-- URL attempted, so that history keeps its endpoint.
INSERT INTO webhook_endpoints (id, merchant_id, url, events, enabled, secret, created_at)
SELECT 'we_' || substr(m.id, 5), m.id, a.url, '*', 0, m.webhook_secret, m.created_at
FROM merchants m
JOIN (SELECT e.merchant_id, max(a.id) AS id FROM delivery_attempts a JOIN events e ON e.id = a.event_id
      WHERE a.url IS NOT NULL GROUP BY e.merchant_id) last ON last.merchant_id = m.id
JOIN delivery_attempts a ON a.id = last.id
WHERE m.webhook_url IS NULL ORDER BY m.created_at, m.id;

CREATE TABLE IF NOT EXISTS deliveries (
    seq              INTEGER PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id),
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id),
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
    attempts         INTEGER NOT NULL DEFAULT 0,   -- since the last replay
    next_attempt_at  INTEGER,                      -- NULL when nothing is scheduled
    lease_owner      TEXT,                         -- the worker attempting it, if any
    lease_expires_at INTEGER,                      -- a lease past this time is void
    last_error       TEXT,
    delivered_at     INTEGER,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS deliveries_endpoint ON deliveries (endpoint_id, seq);
-- A merchant's failing deliveries (failed, or retrying): the console's list and the overview's
-- count read only the merchant's own, however many deliveries the database holds.
CREATE INDEX IF NOT EXISTS deliveries_failing ON deliveries (merchant_id, seq)
    WHERE status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL);

-- Every event that was meant for the merchant's URL is now its delivery to the first endpoint, in
-- the state it was in (pending ones are delivered once, to it); one whose endpoint is disabled and
-- still pending is cancelled. An event marked no_endpoint has no delivery.
INSERT INTO deliveries (event_id, endpoint_id, merchant_id, status, attempts, next_attempt_at,
                        lease_owner, lease_expires_at, last_error, delivered_at)
SELECT e.id, w.id, e.merchant_id,
       CASE WHEN e.status = 'pending' AND w.enabled = 0 THEN 'cancelled' ELSE e.status END,
       e.attempts, CASE WHEN e.status = 'pending' AND w.enabled = 1 THEN e.next_attempt_at END,
       e.lease_owner, e.lease_expires_at, e.last_error, e.delivered_at
FROM events e JOIN webhook_endpoints w ON w.id = 'we_' || substr(e.merchant_id, 5)
WHERE e.status <> 'no_endpoint' ORDER BY e.seq;

ALTER TABLE delivery_attempts ADD COLUMN endpoint_id TEXT REFERENCES webhook_endpoints (id);
UPDATE delivery_attempts SET endpoint_id = (
    SELECT w.id FROM events e JOIN webhook_endpoints w ON w.id = 'we_' || substr(e.merchant_id, 5)
    WHERE e.id = delivery_attempts.event_id);

-- The state moved to the deliveries: the event keeps what it is (its id and exact body).
DROP INDEX IF EXISTS events_due;
DROP INDEX IF EXISTS events_one_pending_test;
ALTER TABLE events DROP COLUMN status;
ALTER TABLE events DROP COLUMN attempts;
ALTER TABLE events DROP COLUMN next_attempt_at;
ALTER TABLE events DROP COLUMN lease_owner;
ALTER TABLE events DROP COLUMN lease_expires_at;
ALTER TABLE events DROP COLUMN last_error;
ALTER TABLE events DROP COLUMN delivered_at;

-- The URL and the rolled secret moved to the endpoint. `webhook_secret` stays: the secret the
-- merchant was given at creation, which its first endpoint takes when it is made later.
ALTER TABLE merchants DROP COLUMN webhook_url;
ALTER TABLE merchants DROP COLUMN previous_webhook_secret;
ALTER TABLE merchants DROP COLUMN previous_webhook_secret_until;

-- /metrics' delivery totals: how many deliveries reached each final state, kept as they do (a
-- scrape reads three rows, however many deliveries are stored); pruned events' counts carry over.
CREATE TABLE IF NOT EXISTS delivery_totals (
    status           TEXT PRIMARY KEY CHECK (status IN ('delivered', 'failed', 'cancelled')),
    count            INTEGER NOT NULL
);
INSERT INTO delivery_totals (status, count)
SELECT status, sum(n) FROM (
    SELECT status, count(*) AS n FROM deliveries WHERE status <> 'pending' GROUP BY status
    UNION ALL SELECT status, count AS n FROM pruned_events WHERE status IN ('delivered', 'failed')
) counted GROUP BY status;
DROP TABLE pruned_events;
