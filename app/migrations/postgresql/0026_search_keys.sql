-- Version 26 (PostgreSQL): the console's search rows keyed by 8 bytes instead of the merchant's id
-- and the value's text, a third of their size: process_search (key, seq), `key` the first 8 bytes
-- of SHA-256 of "merchant_id/value" (UTF-8) as a signed big-endian integer
-- (app/data/processes.py search_key), made here from the rows there.
CREATE TABLE IF NOT EXISTS process_search_keys (
    key             BIGINT NOT NULL,
    seq             BIGINT NOT NULL REFERENCES processes (seq),
    PRIMARY KEY (key, seq)
);
INSERT INTO process_search_keys (key, seq)
    SELECT CAST(CAST('x' || left(encode(sha256(convert_to(merchant_id || '/' || value, 'UTF8')),
                                        'hex'), 16) AS bit(64)) AS BIGINT), seq
    FROM process_search ON CONFLICT DO NOTHING;
DROP TABLE process_search;
ALTER TABLE process_search_keys RENAME TO process_search;
ALTER INDEX process_search_keys_pkey RENAME TO process_search_pkey;
