-- +goose Up
-- migrations/mysql/00004_identity.sql in SQLite's terms.
ALTER TABLE sales ADD COLUMN verified_only BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE accounts (
  id            TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 32),
  email         TEXT NOT NULL UNIQUE CHECK (length(email) <= 254),
  password_hash TEXT NOT NULL CHECK (length(password_hash) <= 255),
  verified_at   DATETIME NULL,
  created_at    DATETIME NOT NULL
);

CREATE TABLE account_tokens (
  token_hash TEXT NOT NULL PRIMARY KEY CHECK (length(token_hash) = 64),
  account_id TEXT NOT NULL REFERENCES accounts (id),
  expires_at DATETIME NOT NULL,
  used_at    DATETIME NULL
);

CREATE TABLE passkeys (
  id         TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 255),
  account_id TEXT NOT NULL REFERENCES accounts (id),
  credential TEXT NOT NULL,
  created_at DATETIME NOT NULL
);
CREATE INDEX passkeys_account ON passkeys (account_id);

-- +goose Down
DROP TABLE passkeys;
DROP TABLE account_tokens;
DROP TABLE accounts;
ALTER TABLE sales DROP COLUMN verified_only;
