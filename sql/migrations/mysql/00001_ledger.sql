-- +goose Up
CREATE TABLE sales (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name           VARCHAR(200) NOT NULL,
  item           VARCHAR(200) NOT NULL,
  price_cents    BIGINT NOT NULL,
  total          BIGINT NOT NULL,
  per_user_limit BIGINT NOT NULL,
  starts_at      DATETIME(3) NOT NULL,
  ends_at        DATETIME(3) NOT NULL,
  status         VARCHAR(16) NOT NULL DEFAULT 'active',
  created_at     DATETIME(3) NOT NULL,
  updated_at     DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  KEY sales_ends_at (ends_at),
  CONSTRAINT sales_status CHECK (status IN ('active', 'paused', 'ended'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per accepted buy; the unique key makes redelivered events no-ops.
CREATE TABLE orders (
  id               VARCHAR(48) NOT NULL,
  sale_id          BIGINT UNSIGNED NOT NULL,
  user_id          VARCHAR(64) NOT NULL,
  request_id       VARCHAR(64) NOT NULL,
  qty              INT NOT NULL,
  unit_price_cents BIGINT NOT NULL,
  amount_cents     BIGINT NOT NULL,
  status           VARCHAR(16) NOT NULL DEFAULT 'pending',
  created_at       DATETIME(3) NOT NULL,
  expires_at       DATETIME(3) NOT NULL,
  paid_at          DATETIME(3) NULL,
  cancelled_at     DATETIME(3) NULL,
  persisted_at     DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY orders_request (sale_id, user_id, request_id),
  KEY orders_user (user_id, created_at),
  KEY orders_sale_status (sale_id, status),
  CONSTRAINT orders_sale FOREIGN KEY (sale_id) REFERENCES sales (id),
  CONSTRAINT orders_status CHECK (status IN ('pending', 'paid', 'cancelled')),
  CONSTRAINT orders_qty CHECK (qty > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The stock ledger: its deltas sum to a sale's available units.
-- initial and restock rows have no order; sale and cancel rows have one each.
CREATE TABLE stock_movements (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  sale_id    BIGINT UNSIGNED NOT NULL,
  order_id   VARCHAR(48) NULL,
  delta      BIGINT NOT NULL,
  reason     VARCHAR(16) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY movements_order_reason (order_id, reason),
  KEY movements_sale_reason (sale_id, reason),
  CONSTRAINT movements_sale FOREIGN KEY (sale_id) REFERENCES sales (id),
  CONSTRAINT movements_reason CHECK (reason IN ('initial', 'restock', 'sale', 'cancel'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE stock_movements;
DROP TABLE orders;
DROP TABLE sales;
