-- +goose Up
-- Sales that sell only to verified identities.
ALTER TABLE sales ADD COLUMN verified_only BOOLEAN NOT NULL DEFAULT FALSE;

-- Built-in shopper accounts (a shop without its own OpenID Connect
-- provider): the email as normalised, unique; the password as an argon2id
-- hash in the PHC string format.
CREATE TABLE accounts (
  id            VARCHAR(32)  NOT NULL PRIMARY KEY,
  email         VARCHAR(254) NOT NULL,
  password_hash VARCHAR(255) NOT NULL,
  verified_at   DATETIME(3)  NULL,
  created_at    DATETIME(3)  NOT NULL,
  UNIQUE KEY accounts_email (email)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Email verification tokens, by the SHA-256 of the token: each used once.
CREATE TABLE account_tokens (
  token_hash CHAR(64)    NOT NULL PRIMARY KEY,
  account_id VARCHAR(32) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  used_at    DATETIME(3) NULL,
  CONSTRAINT account_tokens_account FOREIGN KEY (account_id) REFERENCES accounts (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Passkeys (WebAuthn credentials) of accounts; credential is the
-- credential as go-webauthn keeps it, in JSON.
CREATE TABLE passkeys (
  id         VARCHAR(255) NOT NULL PRIMARY KEY,
  account_id VARCHAR(32)  NOT NULL,
  credential TEXT         NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  KEY passkeys_account (account_id),
  CONSTRAINT passkeys_account FOREIGN KEY (account_id) REFERENCES accounts (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE passkeys;
DROP TABLE account_tokens;
DROP TABLE accounts;
ALTER TABLE sales DROP COLUMN verified_only;
