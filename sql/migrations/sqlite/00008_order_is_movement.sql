-- +goose Up
-- An order row is its sale's stock movement (-qty): workers of this release
-- write no second row per order, and the ledger's sums read the orders
-- (orders.Store.Totals), leaving out the rows of reason 'sale' that earlier
-- releases wrote (kept: a downgrade needs them).
-- orders_sale_status goes too: the unique key on (sale_id, user_id,
-- request_id) starts with sale_id and serves a sale's reads.
DROP INDEX orders_sale_status;

-- +goose Down
INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at)
  SELECT o.sale_id, o.id, -o.qty, 'sale', o.created_at FROM orders o
  WHERE NOT EXISTS (SELECT 1 FROM stock_movements m WHERE m.order_id = o.id AND m.reason = 'sale');
CREATE INDEX orders_sale_status ON orders (sale_id, status);
