-- Version 19 (SQLite): who paid a refund, who named its transaction, and why a name was cleared;
-- a transaction is "already named" only among one merchant's refunds (docs/payments.md, "Refunds").
-- sender: the settling transfer's from address (EIP-55), set when the refund completes (NULL until
--   then, and again after a reversal).
-- named_by: who named its transaction: the console user's e-mail, or 'secret key' (the merchant
--   API); NULL when nothing is named (the watcher finds a payout-address transfer by itself).
-- cleared_tx_hash, cleared_reason: the last name the watcher cleared, and why (a sentence shown to
--   the merchant: the console's refund page and the Refund object).
ALTER TABLE refunds ADD COLUMN sender TEXT;
ALTER TABLE refunds ADD COLUMN named_by TEXT;
ALTER TABLE refunds ADD COLUMN cleared_tx_hash TEXT;
ALTER TABLE refunds ADD COLUMN cleared_reason TEXT;
-- A transaction names one refund of a merchant (a cancelled refund's name frees it); another
-- merchant naming the same hash is neither refused nor told (the watcher clears a name that is not
-- the merchant's own payment).
DROP INDEX IF EXISTS refunds_named;
CREATE UNIQUE INDEX IF NOT EXISTS refunds_named ON refunds (merchant_id, chain_id, named_tx_hash)
    WHERE named_tx_hash IS NOT NULL AND status != 'cancelled';
