-- +goose Up
-- A sale's waiting room (API.md, Waiting room). queue_opens_at is NULL for
-- sales made before rooms existed: their room would open 15 min before
-- their start.
ALTER TABLE sales
  ADD COLUMN waiting_room BOOLEAN NOT NULL DEFAULT FALSE,
  ADD COLUMN queue_opens_at DATETIME(3) NULL,
  ADD COLUMN admit_per_second INT NOT NULL DEFAULT 100;

-- +goose Down
ALTER TABLE sales DROP COLUMN admit_per_second, DROP COLUMN queue_opens_at, DROP COLUMN waiting_room;
