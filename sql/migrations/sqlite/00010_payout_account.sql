-- +goose Up
-- migrations/mysql/00010_payout_account.sql in SQLite's terms.
ALTER TABLE merchants ADD COLUMN payout_account TEXT NOT NULL DEFAULT '';
ALTER TABLE payouts ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE payouts ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE payouts ADD COLUMN returned_at DATETIME NULL;
CREATE INDEX payouts_unsettled ON payouts (status, updated_at);

-- +goose Down
DROP INDEX payouts_unsettled;
ALTER TABLE payouts DROP COLUMN returned_at;
ALTER TABLE payouts DROP COLUMN currency;
ALTER TABLE payouts DROP COLUMN account;
ALTER TABLE merchants DROP COLUMN payout_account;
