-- +goose Up
-- migrations/mysql/00009_funds.sql in SQLite's terms; triggers keep the
-- transfers append-only, and orders is rebuilt for its wider status check
-- (SQLite cannot alter a CHECK).
CREATE TABLE transfers (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  id           TEXT NOT NULL UNIQUE CHECK (length(id) <= 128),
  movement_id  TEXT NOT NULL CHECK (length(movement_id) <= 128),
  kind         TEXT NOT NULL CHECK (kind IN ('topup', 'charge', 'fee', 'refund', 'credit', 'payout', 'hold', 'post', 'void')),
  amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
  debit        TEXT NOT NULL CHECK (length(debit) <= 100),
  credit       TEXT NOT NULL CHECK (length(credit) <= 100 AND credit <> debit),
  order_id     TEXT NULL,
  topup_id     TEXT NULL,
  payout_id    TEXT NULL,
  at           DATETIME NOT NULL,
  persisted_at DATETIME NOT NULL
);
CREATE INDEX transfers_debit ON transfers (debit, seq);
CREATE INDEX transfers_credit ON transfers (credit, seq);
CREATE INDEX transfers_order ON transfers (order_id);
-- +goose StatementBegin
CREATE TRIGGER transfers_no_update BEFORE UPDATE ON transfers
BEGIN SELECT RAISE(ABORT, 'transfers are append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER transfers_no_delete BEFORE DELETE ON transfers
BEGIN SELECT RAISE(ABORT, 'transfers are append-only'); END;
-- +goose StatementEnd

CREATE TABLE topups (
  id           TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 48),
  user_id      TEXT NOT NULL CHECK (length(user_id) <= 64),
  request_id   TEXT NOT NULL CHECK (length(request_id) <= 64),
  amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
  currency     TEXT NOT NULL CHECK (length(currency) = 3),
  status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  provider_ref TEXT NULL,
  checkout_url TEXT NULL,
  created_at   DATETIME NOT NULL,
  updated_at   DATETIME NOT NULL,
  UNIQUE (user_id, request_id)
);

CREATE TABLE payouts (
  id           TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 48),
  merchant_id  INTEGER NOT NULL,
  request_id   TEXT NOT NULL CHECK (length(request_id) <= 64),
  amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
  status       TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid', 'failed')),
  provider_ref TEXT NULL,
  created_at   DATETIME NOT NULL,
  updated_at   DATETIME NOT NULL,
  UNIQUE (merchant_id, request_id)
);

CREATE TABLE orders_funds (
  id               TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 48),
  sale_id          INTEGER NOT NULL REFERENCES sales (id),
  user_id          TEXT NOT NULL CHECK (length(user_id) <= 64),
  request_id       TEXT NOT NULL CHECK (length(request_id) <= 64),
  qty              INTEGER NOT NULL CHECK (qty > 0),
  unit_price_cents INTEGER NOT NULL,
  amount_cents     INTEGER NOT NULL,
  status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid', 'cancelled', 'refunded')),
  created_at       DATETIME NOT NULL,
  expires_at       DATETIME NOT NULL,
  paid_at          DATETIME NULL,
  cancelled_at     DATETIME NULL,
  persisted_at     DATETIME NOT NULL,
  charge_id        TEXT NULL,
  refunded_at      DATETIME NULL,
  UNIQUE (sale_id, user_id, request_id)
);
INSERT INTO orders_funds (id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status, created_at,
  expires_at, paid_at, cancelled_at, persisted_at)
  SELECT id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents, status, created_at,
  expires_at, paid_at, cancelled_at, persisted_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_funds RENAME TO orders;
CREATE INDEX orders_user ON orders (user_id, created_at);

-- +goose Down
CREATE TABLE orders_plain (
  id               TEXT NOT NULL PRIMARY KEY CHECK (length(id) <= 48),
  sale_id          INTEGER NOT NULL REFERENCES sales (id),
  user_id          TEXT NOT NULL CHECK (length(user_id) <= 64),
  request_id       TEXT NOT NULL CHECK (length(request_id) <= 64),
  qty              INTEGER NOT NULL CHECK (qty > 0),
  unit_price_cents INTEGER NOT NULL,
  amount_cents     INTEGER NOT NULL,
  status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid', 'cancelled')),
  created_at       DATETIME NOT NULL,
  expires_at       DATETIME NOT NULL,
  paid_at          DATETIME NULL,
  cancelled_at     DATETIME NULL,
  persisted_at     DATETIME NOT NULL,
  UNIQUE (sale_id, user_id, request_id)
);
INSERT INTO orders_plain SELECT id, sale_id, user_id, request_id, qty, unit_price_cents, amount_cents,
  CASE status WHEN 'refunded' THEN 'paid' ELSE status END, created_at, expires_at, paid_at, cancelled_at, persisted_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_plain RENAME TO orders;
CREATE INDEX orders_user ON orders (user_id, created_at);
DROP TABLE payouts;
DROP TABLE topups;
DROP TRIGGER transfers_no_delete;
DROP TRIGGER transfers_no_update;
DROP TABLE transfers;
