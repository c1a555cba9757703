-- Version 26 (SQLite): the console's search rows keyed by 8 bytes instead of the merchant's id and
-- the value's text, a third of their size: process_search (key, seq), `key` the first 8 bytes of
-- SHA-256 of "merchant_id/value" (UTF-8) as a signed big-endian integer (app/data/processes.py
-- search_key). SQLite has no SHA-256: migrate.py fills this table from the rows there, drops the
-- old one and gives this one its name.
CREATE TABLE IF NOT EXISTS process_search_keys (
    key             INTEGER NOT NULL,
    seq             INTEGER NOT NULL REFERENCES processes (seq),
    PRIMARY KEY (key, seq)
) WITHOUT ROWID;
