-- +goose Up
-- A hot sale's stock may be split into buckets (stock hashes on different
-- Redis masters); fixed when the sale is created.
ALTER TABLE sales ADD COLUMN buckets INT NOT NULL DEFAULT 1,
  ADD CONSTRAINT sales_buckets CHECK (buckets BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE sales DROP CONSTRAINT sales_buckets, DROP COLUMN buckets;
