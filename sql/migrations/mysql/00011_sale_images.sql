-- +goose Up
-- A sale's description, and its product image: the image's bytes (a JPEG
-- the server re-encoded) in a table of their own, so reading sales never
-- reads them; the sale names its current image by its ETag ('' none).
ALTER TABLE sales
  ADD COLUMN description VARCHAR(2000) NOT NULL DEFAULT '',
  ADD COLUMN image_etag VARCHAR(64) NOT NULL DEFAULT '';

CREATE TABLE sale_images (
  sale_id    BIGINT UNSIGNED NOT NULL,
  etag       VARCHAR(64)     NOT NULL,
  width      INT             NOT NULL,
  height     INT             NOT NULL,
  bytes      MEDIUMBLOB      NOT NULL,
  updated_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (sale_id),
  CONSTRAINT sale_images_sale FOREIGN KEY (sale_id) REFERENCES sales (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE sale_images;
ALTER TABLE sales DROP COLUMN image_etag, DROP COLUMN description;
