package orders_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system/servertest"
)

// TestSaleImageStored: an image is stored, replaced and removed with its
// sale naming it, in both ledgers; first images of several sales stored
// at once do not deadlock (each in a transaction, as a change runs).
func TestSaleImageStored(t *testing.T) {
	servertest.EachLedger(t, func(t *testing.T, db *sqlx.DB) {
		ctx := context.Background()
		st := orders.NewStore(db)
		sl := ledgerSale(t, st)
		set := func(img seckill.SaleImage) {
			t.Helper()
			err := st.InTx(ctx, func(ctx context.Context) error { return st.SetSaleImage(ctx, img, time.Now()) })
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, etag := range []string{"first", "second"} {
			set(seckill.SaleImage{SaleID: sl.ID, ETag: etag, Width: 2, Height: 1, Bytes: []byte("jpeg " + etag)})
			img, err := st.SaleImage(ctx, sl.ID)
			got, _ := st.Sale(ctx, sl.ID)
			if err != nil || img.ETag != etag || string(img.Bytes) != "jpeg "+etag || got.ImageETag != etag {
				t.Errorf("after %s: %+v %v, the sale names %q", etag, img, err, got.ImageETag)
			}
		}
		set(seckill.SaleImage{SaleID: sl.ID})
		if _, err := st.SaleImage(ctx, sl.ID); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("after removing: %v", err)
		}
		if got, _ := st.Sale(ctx, sl.ID); got.ImageETag != "" {
			t.Errorf("after removing the sale names %q", got.ImageETag)
		}
		// First images of several new sales at once.
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			other := ledgerSale(t, st)
			wg.Go(func() {
				errs[i] = st.InTx(ctx, func(ctx context.Context) error {
					if _, err := st.SaleForUpdate(ctx, other.ID); err != nil {
						return err
					}
					return st.SetSaleImage(ctx, seckill.SaleImage{SaleID: other.ID, ETag: "e", Width: 1, Height: 1, Bytes: []byte("x")}, time.Now())
				})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("first images at once: %v", err)
		}
	})
}
