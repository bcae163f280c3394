-- +goose Up
-- Money (API.md, Funds). transfers is the double-entry ledger: each row
-- debits one account and credits another by a positive amount, so the
-- accounts add up to zero; rows are appended, never updated or deleted
-- (the application's user may only read and insert them: orders.AppGrants).
-- seq orders an account's statement; id is the transfer's own (a retry is
-- a duplicate of it, and a no-op).
CREATE TABLE transfers (
  seq          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  id           VARCHAR(128) NOT NULL,
  movement_id  VARCHAR(128) NOT NULL,
  kind         VARCHAR(16) NOT NULL,
  amount_cents BIGINT NOT NULL,
  debit        VARCHAR(100) NOT NULL,
  credit       VARCHAR(100) NOT NULL,
  order_id     VARCHAR(48) NULL,
  topup_id     VARCHAR(48) NULL,
  payout_id    VARCHAR(48) NULL,
  at           DATETIME(3) NOT NULL,
  persisted_at DATETIME(3) NOT NULL,
  PRIMARY KEY (seq),
  UNIQUE KEY transfers_id (id),
  KEY transfers_debit (debit, seq),
  KEY transfers_credit (credit, seq),
  KEY transfers_order (order_id),
  CONSTRAINT transfers_kind CHECK (kind IN ('topup', 'charge', 'fee', 'refund', 'credit', 'payout', 'hold', 'post', 'void')),
  CONSTRAINT transfers_amount CHECK (amount_cents > 0),
  CONSTRAINT transfers_sides CHECK (debit <> credit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A shopper's top-up at the payment provider: credited once its signed
-- webhook says the payment succeeded.
CREATE TABLE topups (
  id           VARCHAR(48) NOT NULL,
  user_id      VARCHAR(64) NOT NULL,
  request_id   VARCHAR(64) NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency     CHAR(3) NOT NULL,
  status       VARCHAR(16) NOT NULL DEFAULT 'pending',
  provider_ref VARCHAR(255) NULL,
  checkout_url VARCHAR(2048) NULL,
  created_at   DATETIME(3) NOT NULL,
  updated_at   DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY topups_request (user_id, request_id),
  CONSTRAINT topups_status CHECK (status IN ('pending', 'succeeded', 'failed')),
  CONSTRAINT topups_amount CHECK (amount_cents > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A merchant's payout to its bank through the provider.
CREATE TABLE payouts (
  id           VARCHAR(48) NOT NULL,
  merchant_id  BIGINT UNSIGNED NOT NULL,
  request_id   VARCHAR(64) NOT NULL,
  amount_cents BIGINT NOT NULL,
  status       VARCHAR(16) NOT NULL DEFAULT 'pending',
  provider_ref VARCHAR(255) NULL,
  created_at   DATETIME(3) NOT NULL,
  updated_at   DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY payouts_request (merchant_id, request_id),
  CONSTRAINT payouts_status CHECK (status IN ('pending', 'paid', 'failed')),
  CONSTRAINT payouts_amount CHECK (amount_cents > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- An order paid from a wallet keeps its charge; a paid order may be
-- refunded.
ALTER TABLE orders
  DROP CONSTRAINT orders_status,
  ADD COLUMN charge_id VARCHAR(128) NULL,
  ADD COLUMN refunded_at DATETIME(3) NULL,
  ADD CONSTRAINT orders_status CHECK (status IN ('pending', 'paid', 'cancelled', 'refunded'));

-- +goose Down
-- A refunded order reads as paid to a release without refunds.
ALTER TABLE orders DROP CONSTRAINT orders_status;
UPDATE orders SET status = 'paid' WHERE status = 'refunded';
ALTER TABLE orders
  DROP COLUMN refunded_at,
  DROP COLUMN charge_id,
  ADD CONSTRAINT orders_status CHECK (status IN ('pending', 'paid', 'cancelled'));
DROP TABLE payouts;
DROP TABLE topups;
DROP TABLE transfers;
