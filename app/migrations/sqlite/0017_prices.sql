-- Version 17 (SQLite): prices in the merchant's currency (docs/payments.md, "Prices in the
-- merchant's currency"). Everything that existed was priced in dollars and paid 1:1 in dollar
-- tokens: it upgrades to USD in place.
-- merchants.currency: the default for its new processes (`merchants set-currency`).
-- processes.currency: ISO 4217; the amount has at most its minor-unit digits.
-- assets.peg: the currency one token is worth (`assets add --peg`, `assets set-peg`).
-- payments.quote: the locked quote of the current choice, compact JSON of the `quote` object with
--   exact decimal strings (NULL: a payment made before quotes, at par in USD).
-- payment_choices.amount_due: what an earlier choice was due (base units), so a transfer still made
--   with it counts for its share of that quote, not 1:1 in another currency's token (NULL: made
--   before quotes, when every choice was due the same amount).
ALTER TABLE merchants ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE processes ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE assets ADD COLUMN peg TEXT NOT NULL DEFAULT 'USD';
ALTER TABLE payments ADD COLUMN quote TEXT;
ALTER TABLE payment_choices ADD COLUMN amount_due TEXT;
-- One source per pair ("EUR/USD": the price of one EUR in USD): a price feed on a network, read by
-- the chain watcher on each poll, or a manual rate set by the operator. The last answer read is
-- kept with its round, so a confirm never asks a node.
CREATE TABLE IF NOT EXISTS rates (
    pair              TEXT PRIMARY KEY,             -- "EUR/USD"
    source            TEXT NOT NULL CHECK (source IN ('feed', 'manual')),
    network_id        TEXT REFERENCES networks (id),  -- a feed's network
    feed              TEXT,                         -- a feed's contract (EIP-55)
    feed_decimals     INTEGER,                      -- its decimals(), read when added
    sequencer_feed    TEXT,                         -- an L2's sequencer uptime feed (EIP-55)
    max_age           INTEGER NOT NULL CHECK (max_age > 0),  -- seconds an answer counts for
    max_depeg         TEXT NOT NULL DEFAULT '2',    -- percent, for a peg guard (SYMBOL/PEG)
    value             TEXT,                         -- the rate, exact decimal text (NULL: never read)
    round_id          TEXT,                         -- a feed's latest round, decimal text
    answered_in_round TEXT,
    updated_at        INTEGER,                      -- the round's updatedAt; a manual rate's set time
    sequencer_answer  INTEGER,                      -- 0: up, 1: down (Chainlink's convention)
    sequencer_since   INTEGER,                      -- its startedAt: when the status last changed
    problem           TEXT,                         -- why the last read cannot count (NULL: none)
    read_at           INTEGER,                      -- when the watcher last recorded a new answer
    reported          TEXT,                         -- the state and reason last logged
    created_at        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rates_network ON rates (network_id);
