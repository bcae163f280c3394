-- +goose Up
-- Merchants of the admin panel, each owning its sales (merchant_id 0: the
-- operator's).
CREATE TABLE merchants (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  email          VARCHAR(254) NOT NULL,
  name           VARCHAR(200) NOT NULL,
  password_hash  VARCHAR(255) NOT NULL,
  totp_secret    VARCHAR(64)  NOT NULL DEFAULT '',
  totp_confirmed BOOLEAN      NOT NULL DEFAULT FALSE,
  totp_step      BIGINT       NOT NULL DEFAULT 0,
  disabled       BOOLEAN      NOT NULL DEFAULT FALSE,
  -- Sessions opened until then (unix ms) are refused: set at disabling.
  sessions_after BIGINT       NOT NULL DEFAULT 0,
  created_at     DATETIME(3)  NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY merchants_email (email)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE sales ADD COLUMN merchant_id BIGINT UNSIGNED NOT NULL DEFAULT 0, ADD KEY sales_merchant (merchant_id);

-- +goose Down
ALTER TABLE sales DROP KEY sales_merchant, DROP COLUMN merchant_id;
DROP TABLE merchants;
