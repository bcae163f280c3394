-- +goose Up
-- An order row is its sale's stock movement (-qty): workers of this release
-- write no second row per order, and the ledger's sums read the orders
-- (orders.Store.Totals), leaving out the rows of reason 'sale' that earlier
-- releases wrote (kept: deleting them would scan and lock the table, and a
-- downgrade needs them). Stop the reconcilers of earlier releases before
-- this release's workers write (README, "Upgrading past migration 00008"): they sum
-- stock_movements alone.
-- orders_sale_status goes too: the unique key orders_request starts with
-- sale_id and serves a sale's reads.
ALTER TABLE orders DROP INDEX orders_sale_status;

-- +goose Down
-- The sale rows of the orders written since, then the index: a Down that
-- failed half-way can run again.
INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at)
  SELECT o.sale_id, o.id, -o.qty, 'sale', o.created_at FROM orders o
  WHERE NOT EXISTS (SELECT 1 FROM stock_movements m WHERE m.order_id = o.id AND m.reason = 'sale');
ALTER TABLE orders ADD KEY orders_sale_status (sale_id, status);
