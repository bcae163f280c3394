-- +goose Up
-- Bot defence per sale: buys need a ticket, and a ticket may need a proof
-- of work of pow_difficulty leading zero bits (0: none).
ALTER TABLE sales ADD COLUMN require_ticket BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sales ADD COLUMN pow_difficulty INTEGER NOT NULL DEFAULT 0 CHECK (pow_difficulty BETWEEN 0 AND 32);

-- +goose Down
ALTER TABLE sales DROP COLUMN pow_difficulty;
ALTER TABLE sales DROP COLUMN require_ticket;
