-- +goose Up
-- An order row is its sale's stock movement (-qty): the worker no longer
-- writes a second row per order, and the ledger's sums read the orders
-- (orders.Store.Totals). Rows of reason 'sale' that a worker of an earlier
-- release still writes during an upgrade are left out of the sums.
-- orders_sale_status goes too: the unique key orders_request starts with
-- sale_id and serves a sale's reads.
DELETE FROM stock_movements WHERE reason = 'sale';
ALTER TABLE orders DROP INDEX orders_sale_status;

-- +goose Down
ALTER TABLE orders ADD KEY orders_sale_status (sale_id, status);
INSERT INTO stock_movements (sale_id, order_id, delta, reason, created_at)
  SELECT sale_id, id, -qty, 'sale', created_at FROM orders;
