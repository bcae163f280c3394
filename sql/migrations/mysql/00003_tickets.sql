-- +goose Up
-- Bot defence per sale: buys need a ticket, and a ticket may need a proof
-- of work of pow_difficulty leading zero bits (0: none).
ALTER TABLE sales ADD COLUMN require_ticket BOOLEAN NOT NULL DEFAULT FALSE,
  ADD COLUMN pow_difficulty INT NOT NULL DEFAULT 0,
  ADD CONSTRAINT sales_pow_difficulty CHECK (pow_difficulty BETWEEN 0 AND 32);

-- +goose Down
ALTER TABLE sales DROP CONSTRAINT sales_pow_difficulty, DROP COLUMN pow_difficulty, DROP COLUMN require_ticket;
