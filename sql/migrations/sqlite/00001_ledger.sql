-- +goose Up
-- The ledger of the embedded mode: the same tables, keys and checks as
-- migrations/mysql/00001_ledger.sql in SQLite's terms. Times are UTC text.
CREATE TABLE sales (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  name           TEXT NOT NULL CHECK (length(name) <= 200),
  item           TEXT NOT NULL CHECK (length(item) <= 200),
  price_cents    INTEGER NOT NULL,
  total          INTEGER NOT NULL,
  per_user_limit INTEGER NOT NULL,
  starts_at      DATETIME NOT NULL,
  ends_at        DATETIME NOT NULL,
  status         TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'ended')),
  created_at     DATETIME NOT NULL,
  updated_at     DATETIME NOT NULL
);
CREATE INDEX sales_ends_at ON sales (ends_at);

-- One row per accepted buy; the unique key makes redelivered events no-ops.
CREATE TABLE orders (
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
CREATE INDEX orders_user ON orders (user_id, created_at);
CREATE INDEX orders_sale_status ON orders (sale_id, status);

-- The stock ledger: its deltas sum to a sale's available units.
-- initial and restock rows have no order; sale and cancel rows have one each.
CREATE TABLE stock_movements (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  sale_id    INTEGER NOT NULL REFERENCES sales (id),
  order_id   TEXT NULL,
  delta      INTEGER NOT NULL,
  reason     TEXT NOT NULL CHECK (reason IN ('initial', 'restock', 'sale', 'cancel')),
  created_at DATETIME NOT NULL,
  UNIQUE (order_id, reason)
);
CREATE INDEX movements_sale_reason ON stock_movements (sale_id, reason);

-- +goose Down
DROP TABLE stock_movements;
DROP TABLE orders;
DROP TABLE sales;
