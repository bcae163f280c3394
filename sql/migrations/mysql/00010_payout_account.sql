-- +goose Up
-- Where a merchant's payouts go at the provider: its Stripe connected
-- account (acct_…), set by the operator; empty: none yet.
ALTER TABLE merchants ADD COLUMN payout_account VARCHAR(255) NOT NULL DEFAULT '';

-- A payout keeps where it goes and in what currency as they were when it
-- was asked for (a retry sends the same), and when a refused one's money
-- came back (NULL: not yet, or not refused).
ALTER TABLE payouts
  ADD COLUMN account VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN currency CHAR(3) NOT NULL DEFAULT '',
  ADD COLUMN returned_at DATETIME(3) NULL,
  ADD KEY payouts_unsettled (status, updated_at);

-- +goose Down
ALTER TABLE payouts DROP KEY payouts_unsettled, DROP COLUMN returned_at, DROP COLUMN currency, DROP COLUMN account;
ALTER TABLE merchants DROP COLUMN payout_account;
