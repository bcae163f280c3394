package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill"
)

// saleImageRow is a row of sale_images.
type saleImageRow struct {
	SaleID    int64     `db:"sale_id"`
	ETag      string    `db:"etag"`
	Width     int       `db:"width"`
	Height    int       `db:"height"`
	Bytes     []byte    `db:"bytes"`
	UpdatedAt time.Time `db:"updated_at"`
}

func (r saleImageRow) image() seckill.SaleImage {
	return seckill.SaleImage{SaleID: r.SaleID, ETag: r.ETag, Width: r.Width, Height: r.Height, Bytes: r.Bytes, UpdatedAt: r.UpdatedAt}
}

const (
	deleteSaleImage  = `DELETE FROM sale_images WHERE sale_id = ?`
	insertSaleImage  = `INSERT INTO sale_images (sale_id, etag, width, height, bytes, updated_at) VALUES (?, ?, ?, ?, ?, ?)`
	setSaleImageETag = `UPDATE sales SET image_etag = ?, updated_at = ? WHERE id = ?`
	selectSaleImage  = `SELECT sale_id, etag, width, height, bytes, updated_at FROM sale_images WHERE sale_id = ?`
)

// SetSaleImage makes img the sale's image (replacing one it had), or, with
// img.ETag "", removes it; the sale names it by its ETag. Run it in the
// caller's transaction with the sale's row locked.
func (s *Store) SetSaleImage(ctx context.Context, img seckill.SaleImage, now time.Time) error {
	q := s.q(ctx)
	if img.ETag == "" {
		if _, err := q.ExecContext(ctx, deleteSaleImage, img.SaleID); err != nil {
			return failed(fmt.Sprintf("sale %d: remove the image", img.SaleID), err)
		}
	} else if _, err := q.ExecContext(ctx, insertSaleImage+s.dialect.upsertImage, img.SaleID, img.ETag, img.Width, img.Height,
		img.Bytes, now.UTC()); err != nil {
		return failed(fmt.Sprintf("sale %d: store the image", img.SaleID), err)
	}
	if _, err := q.ExecContext(ctx, setSaleImageETag, img.ETag, now.UTC(), img.SaleID); err != nil {
		return failed(fmt.Sprintf("sale %d: name the image", img.SaleID), err)
	}
	return nil
}

// SaleImage returns a sale's image, or seckill.ErrNotFound.
func (s *Store) SaleImage(ctx context.Context, sale int64) (seckill.SaleImage, error) {
	return one(ctx, s, saleImageRow.image, fmt.Errorf("orders: sale %d has no image: %w", sale, seckill.ErrNotFound),
		fmt.Sprintf("sale %d's image", sale), selectSaleImage, sale)
}
