-- Version 3 (PostgreSQL): test networks, and transfers reversed by a deep reorganisation. Written to
-- run again harmlessly (IF [NOT] EXISTS), as every version may on a database from before versions.
--
-- networks.testnet: the operator's `networks add --testnet`. A network is a test network when this
-- is set OR its chain id is a well-known test chain's (app/chain/testnets.py): the networks an
-- earlier release added keep 0 here and are classed by their chain id alone (docs/payments.md).
ALTER TABLE networks ADD COLUMN IF NOT EXISTS testnet SMALLINT NOT NULL DEFAULT 0 CHECK (testnet IN (0, 1));

-- transfers.status gains `reversed`: a transfer that had counted (confirmed) left the chain in a
-- reorganisation deeper than the confirmation depth (payment.reversed). Orphaned and reversed rows
-- are kept for the record; the same transaction included again in another block revives its row.
ALTER TABLE transfers DROP CONSTRAINT IF EXISTS transfers_status_check;
ALTER TABLE transfers ADD CONSTRAINT transfers_status_check
    CHECK (status IN ('seen', 'confirmed', 'orphaned', 'reversed'));
