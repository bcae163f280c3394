package sales

import (
	"context"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/images"
)

// SetImage makes raw, an uploaded file, the sale's product image: checked
// and made anew by images.Process (which refuses what is not a sound
// JPEG, PNG or WebP of a bounded size), stored with the sale and audited.
// A sale's image changes while it runs too; its stock is not touched.
func (s *Service) SetImage(ctx context.Context, id int64, raw []byte) (View, error) {
	img, err := images.Process(raw)
	if err != nil {
		return View{}, err
	}
	return s.setImage(ctx, id, seckill.SaleImage{SaleID: id, ETag: img.ETag, Width: img.Width, Height: img.Height, Bytes: img.Bytes})
}

// RemoveImage leaves the sale without an image.
func (s *Service) RemoveImage(ctx context.Context, id int64) (View, error) {
	return s.setImage(ctx, id, seckill.SaleImage{SaleID: id})
}

// setImage stores img as the sale's image (img.ETag "": none), a change
// of the sale like any other; Redis holds nothing of it.
func (s *Service) setImage(ctx context.Context, id int64, img seckill.SaleImage) (View, error) {
	return s.change(ctx, id, seckill.AuditSaleImage, func(ctx context.Context, sl seckill.Sale) (seckill.Sale, error) {
		sl.ImageETag = img.ETag
		return sl, s.ledger.SetSaleImage(ctx, img, s.now())
	}, func(_, _ seckill.Sale) error { return nil })
}

// Image returns a sale's image (seckill.ErrNotFound when it has none).
func (s *Service) Image(ctx context.Context, id int64) (seckill.SaleImage, error) {
	return s.ledger.SaleImage(ctx, id)
}
