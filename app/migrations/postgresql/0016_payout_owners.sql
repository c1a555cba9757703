-- Version 16 (PostgreSQL): whose address sent a transfer. A refund is settled only by its own merchant's
-- payment, so the chain watcher asks which merchants an address belongs to (its current payout
-- address, the payout address a payment's deposit address forwards to, or a deposit address), and
-- `merchants set-payout` refuses an address another merchant holds: both read these columns by
-- address (docs/payments.md, "Refunds").
CREATE INDEX IF NOT EXISTS merchant_payouts_address ON merchant_payouts (payout_address);
CREATE INDEX IF NOT EXISTS payments_payout_address ON payments (payout_address);
