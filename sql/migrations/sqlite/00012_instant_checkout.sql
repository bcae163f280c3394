-- +goose Up
-- migrations/mysql/00012_instant_checkout.sql in SQLite's terms.
ALTER TABLE sales ADD COLUMN instant_checkout BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE sales DROP COLUMN instant_checkout;
