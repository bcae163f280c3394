-- +goose Up
-- migrations/mysql/00006_merchants.sql in SQLite's terms.
CREATE TABLE merchants (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  email          TEXT NOT NULL UNIQUE CHECK (length(email) <= 254),
  name           TEXT NOT NULL CHECK (length(name) <= 200),
  password_hash  TEXT NOT NULL,
  totp_secret    TEXT NOT NULL DEFAULT '',
  totp_confirmed BOOLEAN NOT NULL DEFAULT FALSE,
  totp_step      INTEGER NOT NULL DEFAULT 0,
  disabled       BOOLEAN NOT NULL DEFAULT FALSE,
  sessions_after INTEGER NOT NULL DEFAULT 0,
  created_at     DATETIME NOT NULL
);
ALTER TABLE sales ADD COLUMN merchant_id INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sales_merchant ON sales (merchant_id);

-- +goose Down
DROP INDEX sales_merchant;
ALTER TABLE sales DROP COLUMN merchant_id;
DROP TABLE merchants;
