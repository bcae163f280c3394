-- +goose Up
-- migrations/mysql/00011_sale_images.sql in SQLite's terms.
ALTER TABLE sales ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN image_etag TEXT NOT NULL DEFAULT '';
CREATE TABLE sale_images (
  sale_id    INTEGER PRIMARY KEY REFERENCES sales (id),
  etag       TEXT NOT NULL,
  width      INTEGER NOT NULL,
  height     INTEGER NOT NULL,
  bytes      BLOB NOT NULL,
  updated_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE sale_images;
ALTER TABLE sales DROP COLUMN image_etag;
ALTER TABLE sales DROP COLUMN description;
