package sales

import (
	"context"
	"sync"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/images"
)

// SetImage makes raw, an uploaded file, the sale's product image: checked
// and made anew by images.Process (which refuses what is not a sound
// JPEG, PNG or WebP of a bounded size), stored with the sale and audited.
// A sale's image changes while it runs too; its stock is not touched.
func (s *Service) SetImage(ctx context.Context, id int64, raw []byte) (View, error) {
	// The costly decoding only for a sale the actor may change.
	if _, err := s.Get(ctx, id); err != nil {
		return View{}, err
	}
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

// Image returns a sale's image (seckill.ErrNotFound when it has none),
// named by the sale's row of a second ago at most; an image read once is
// served from memory after (an ETag never names another image), so a
// drop's crowd reads each from the ledger once per process, not once a
// shopper.
func (s *Service) Image(ctx context.Context, id int64) (seckill.SaleImage, error) {
	sl, err := s.rows.get(ctx, id)
	if err != nil {
		return seckill.SaleImage{}, err
	}
	if sl.ImageETag == "" {
		return seckill.SaleImage{}, seckill.ErrNotFound
	}
	if img, ok := s.pictures.get(sl.ImageETag); ok {
		return img, nil
	}
	img, err := s.ledger.SaleImage(ctx, id)
	if err == nil {
		s.pictures.put(img)
	}
	return img, err
}

// pictures are the images last served, by ETag, up to pictureBytes in
// all; the oldest go first.
type pictures struct {
	mu    sync.Mutex
	m     map[string]seckill.SaleImage
	order []string
	bytes int
}

const pictureBytes = 32 << 20

func (p *pictures) get(etag string) (seckill.SaleImage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	img, ok := p.m[etag]
	return img, ok
}

func (p *pictures) put(img seckill.SaleImage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[img.ETag]; ok || len(img.Bytes) > pictureBytes {
		return
	}
	if p.m == nil {
		p.m = map[string]seckill.SaleImage{}
	}
	for p.bytes+len(img.Bytes) > pictureBytes && len(p.order) > 0 {
		old := p.order[0]
		p.order = p.order[1:]
		p.bytes -= len(p.m[old].Bytes)
		delete(p.m, old)
	}
	p.m[img.ETag] = img
	p.order = append(p.order, img.ETag)
	p.bytes += len(img.Bytes)
}
