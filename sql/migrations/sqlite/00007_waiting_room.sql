-- +goose Up
-- A sale's waiting room (API.md, Waiting room). queue_opens_at is NULL for
-- sales made before rooms existed: their room would open 15 min before
-- their start.
ALTER TABLE sales ADD COLUMN waiting_room BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sales ADD COLUMN queue_opens_at DATETIME NULL;
ALTER TABLE sales ADD COLUMN admit_per_second INTEGER NOT NULL DEFAULT 100;

-- +goose Down
ALTER TABLE sales DROP COLUMN admit_per_second;
ALTER TABLE sales DROP COLUMN queue_opens_at;
ALTER TABLE sales DROP COLUMN waiting_room;
