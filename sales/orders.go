package sales

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill"
)

// orderListLimit is the most orders a shopper's list shows.
const orderListLimit = 200

// Orders lists a user's orders, newest first.
func (s *Service) Orders(ctx context.Context, user string) ([]seckill.Order, error) {
	return s.ledger.UserOrders(ctx, user, orderListLimit)
}

// Order returns one of user's orders: from the ledger, or, accepted but
// not written there yet, from its sale's record in Redis (PersistedAt is
// zero then). Another user's order is seckill.ErrOrderNotFound, as an
// unknown one.
func (s *Service) Order(ctx context.Context, id, user string) (seckill.Order, error) {
	o, err := s.ledger.Order(ctx, id)
	switch {
	case err == nil && o.UserID == user:
		return o, nil
	case err == nil:
		return seckill.Order{}, seckill.ErrOrderNotFound
	case !errors.Is(err, seckill.ErrOrderNotFound):
		return seckill.Order{}, err
	}
	return s.unpersisted(ctx, id, user)
}

// unpersisted finds an order in its sale's Redis record of accepted
// orders.
func (s *Service) unpersisted(ctx context.Context, id, user string) (seckill.Order, error) {
	sale := seckill.SaleOfOrder(id)
	if sale == 0 {
		return seckill.Order{}, seckill.ErrOrderNotFound
	}
	e, ok, err := s.stock.Accepted(ctx, sale, id, user)
	if err != nil {
		return seckill.Order{}, err
	}
	if !ok {
		return seckill.Order{}, seckill.ErrOrderNotFound
	}
	if e.PriceCents < 0 { // a record from before prices were kept: the sale's
		e.PriceCents = 0
		if st, err := s.stock.Stock(ctx, sale); err == nil {
			e.PriceCents = st.PriceCents
		}
	}
	if _, err := seckill.Amount(e.Qty, e.PriceCents); err != nil {
		return seckill.Order{}, err
	}
	return e.Order(s.cfg.PaymentWindow, time.Time{}), nil // not persisted: no PersistedAt
}

// persistWait bounds how long paying an order waits for the worker to
// write it; the pipeline normally takes tens of milliseconds (the relay
// lingers up to relay_linger for fuller messages).
const persistWait = 3 * time.Second

// Pay marks one of user's orders paid, if its payment window is open.
// Paying twice is fine; paying a cancelled order is not
// (seckill.ErrOrderCancelled). An order accepted but not in the ledger yet
// is waited for, a few seconds at most.
func (s *Service) Pay(ctx context.Context, id, user string) (seckill.Order, error) {
	o, err := s.ledger.Pay(ctx, id, user, s.now())
	if !errors.Is(err, seckill.ErrOrderNotFound) {
		return o, err
	}
	// Maybe accepted but not persisted yet: wait for the worker.
	if _, err := s.unpersisted(ctx, id, user); err != nil {
		return o, err
	}
	if err := s.awaitPersisted(ctx, id); err != nil {
		return o, err
	}
	return s.ledger.Pay(ctx, id, user, s.now())
}

func (s *Service) awaitPersisted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, persistWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.ledger.Order(ctx, id)
		if !errors.Is(err, seckill.ErrOrderNotFound) {
			return err
		}
		select {
		case <-ctx.Done():
			return seckill.Errorf(seckill.CodeUnavailable, "Your order was accepted but is not recorded yet; retry shortly.")
		case <-tick.C:
		}
	}
}
