-- +goose Up
-- Where a merchant's payouts go at the provider: its Stripe connected
-- account (acct_…), set by the operator; empty: none yet.
ALTER TABLE merchants ADD COLUMN payout_account VARCHAR(255) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE merchants DROP COLUMN payout_account;
