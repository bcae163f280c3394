-- +goose Up
-- The audit log: one row per admin change (appended in the transaction of
-- the change), login and failed login. The application only inserts and
-- reads: docs/api.md shows the grants that keep its database user from
-- changing a row.
CREATE TABLE audit_log (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at          DATETIME(3)     NOT NULL,
  actor       VARCHAR(254)    NOT NULL,
  role        VARCHAR(16)     NOT NULL,
  action      VARCHAR(32)     NOT NULL,
  sale_id     BIGINT UNSIGNED NULL,
  -- owner: the merchant the row belongs to (the sale's owner at the time,
  -- or the merchant concerned; 0: the operator's alone).
  owner       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  before_json TEXT            NULL,
  after_json  TEXT            NULL,
  ip          VARCHAR(64)     NOT NULL,
  PRIMARY KEY (id),
  KEY audit_sale (sale_id, id),
  KEY audit_actor (actor, id),
  KEY audit_owner (owner, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE audit_log;
