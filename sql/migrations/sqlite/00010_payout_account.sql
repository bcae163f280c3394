-- +goose Up
-- migrations/mysql/00010_payout_account.sql in SQLite's terms.
ALTER TABLE merchants ADD COLUMN payout_account TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE merchants DROP COLUMN payout_account;
