-- +goose Up
-- A sale with instant checkout charges the buyer's wallet in the buy
-- itself (API.md, Instant checkout); fixed at creation.
ALTER TABLE sales ADD COLUMN instant_checkout BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE sales DROP COLUMN instant_checkout;
