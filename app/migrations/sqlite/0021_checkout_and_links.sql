-- Version 21 (SQLite): selling without code (docs/api.md, "The checkout page and payment links").
-- processes: what the hosted checkout page shows and where it sends the customer (NULL: not given),
--   the base URL its checkoutUrl was made with (the service's PUBLIC_BASE_URL, or the host the
--   preorder reached; NULL for processes made before), and the payment link it was made from.
-- merchants.display_name: the name the checkout page shows (NULL: the merchant's name).
-- links: a payment link sells one thing again and again; link_hits: the processes a client address
--   made from a link in the last minute (its rate limit), pruned as it goes.
ALTER TABLE processes ADD COLUMN description TEXT;
ALTER TABLE processes ADD COLUMN success_url TEXT;
ALTER TABLE processes ADD COLUMN cancel_url TEXT;
ALTER TABLE processes ADD COLUMN checkout_base TEXT;
ALTER TABLE processes ADD COLUMN link_id TEXT;
ALTER TABLE merchants ADD COLUMN display_name TEXT;
CREATE INDEX IF NOT EXISTS processes_link ON processes (link_id, status) WHERE link_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS links (
    id               TEXT PRIMARY KEY,              -- "link_" + 24 hex
    merchant_id      TEXT NOT NULL REFERENCES merchants (id),
    livemode         INTEGER NOT NULL CHECK (livemode IN (0, 1)),
    amount           TEXT NOT NULL,                 -- exact decimal literal
    currency         TEXT NOT NULL,
    description      TEXT NOT NULL,
    metadata         TEXT NOT NULL,                 -- compact JSON; its processes' add paymentLinkId
    success_url      TEXT,
    max_payments     INTEGER CHECK (max_payments >= 1),  -- NULL: unlimited
    expires_at       INTEGER,                       -- NULL: never
    deactivated_at   INTEGER,
    created_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS links_merchant ON links (merchant_id, created_at);  -- newest first
CREATE TABLE IF NOT EXISTS link_hits (
    link_id          TEXT NOT NULL REFERENCES links (id),
    client           TEXT NOT NULL,                 -- the client address, as the rate limits see it
    created_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS link_hits_client ON link_hits (link_id, client, created_at);
CREATE INDEX IF NOT EXISTS link_hits_created ON link_hits (created_at);
