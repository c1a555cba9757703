-- Version 18 (SQLite): a relayer nobody can drain or switch off for others (docs/payments.md,
-- "Payments without gas").
-- relayed_authorizations.paid_at: when the relayer learned that the relay paid (its transaction
--   succeeded, or its authorization was used by whoever submitted it first); NULL: not known to.
--   A payer with a relay that paid is not new to the relayer (RELAYER_MAX_REVERTS_PER_HOUR).
-- relayed_authorizations.reverted_at: when the relayer learned that the relay's transaction reverted
--   while its authorization stayed unused (the payer moved the money first): the payer is refused
--   for a day, and it counts against RELAYER_MAX_REVERTS_PER_HOUR, not RELAYER_MAX_PER_HOUR.
--   The relays paid before this version are those whose transfer the watcher recorded.
ALTER TABLE relayed_authorizations ADD COLUMN paid_at INTEGER;
ALTER TABLE relayed_authorizations ADD COLUMN reverted_at INTEGER;
UPDATE relayed_authorizations SET paid_at = COALESCE(final_at, created_at)
 WHERE state = 'sent' AND EXISTS (SELECT 1 FROM transfers t
  WHERE t.process_id = relayed_authorizations.process_id AND t.tx_hash = relayed_authorizations.tx_hash
  AND t.status IN ('seen', 'confirmed'));
CREATE INDEX IF NOT EXISTS relayed_reverted ON relayed_authorizations (reverted_at)
    WHERE reverted_at IS NOT NULL;
-- A network's relays whose outcome the relayer has not learned yet (it asks for their receipts).
CREATE INDEX IF NOT EXISTS relayed_unsettled ON relayed_authorizations (network_id, id)
    WHERE final_at IS NULL AND paid_at IS NULL;
-- Authorizations refused (400 or 409) or being checked, per client address and process, within the
-- last 10 minutes: what `429 rate_limited` counts. Rows older than that are deleted as new ones are
-- written, and beyond the newest RELAY_REFUSALS_MAX (app/chain/relayer.py) too: bounded.
CREATE TABLE IF NOT EXISTS relay_refusals (
    id               INTEGER PRIMARY KEY,
    client           TEXT NOT NULL,                 -- the client's address, as ipaddress writes it
    process_id       TEXT NOT NULL,                 -- the path's process id (perhaps no process's)
    refused_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_refusals_client ON relay_refusals (client, refused_at);
CREATE INDEX IF NOT EXISTS relay_refusals_age ON relay_refusals (refused_at);
