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

// Pay pays one of user's orders from the user's wallet, if its payment
// window is open: its amount moves to the sale's merchant (less the
// platform's fee), exactly once. Paying a paid order again charges
// nothing and answers the same; a cancelled order is
// seckill.ErrOrderCancelled, a refunded one seckill.ErrOrderRefunded, a
// wallet holding too little seckill.ErrInsufficientFunds (the order stays
// pending). An order accepted but not in the ledger yet is waited for, a
// few seconds at most.
func (s *Service) Pay(ctx context.Context, id, user string) (seckill.Order, error) {
	o, err := s.pay(ctx, id, user)
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
	return s.pay(ctx, id, user)
}

// pay charges and marks an order paid in one ledger transaction with the
// order's row locked, so the payment timeout, which cancels with a
// compare-and-set on the same row, waits for it. The charge in Redis comes
// before the commit: a wallet short of money rolls the payment back; a
// crash after the charge leaves the order pending, and the timeout that
// cancels it voids the charge (worker.TimeoutConsumer, funds.Store.Cancel),
// so an order ends paid-and-charged or cancelled-and-uncharged.
func (s *Service) pay(ctx context.Context, id, user string) (seckill.Order, error) {
	var o seckill.Order
	err := s.ledger.InTx(ctx, func(ctx context.Context) error {
		var err error
		if o, err = s.ledger.OrderForUpdate(ctx, id); err != nil {
			return err
		}
		now := s.now()
		switch {
		case o.UserID != user:
			return seckill.ErrOrderNotFound // another user's order is as an unknown one
		case o.Status == seckill.OrderPaid:
			return nil
		case o.Status == seckill.OrderCancelled:
			return seckill.ErrOrderCancelled
		case o.Status == seckill.OrderRefunded:
			return seckill.ErrOrderRefunded
		case !now.Before(o.ExpiresAt):
			return seckill.ErrPaymentExpired
		}
		sale, err := s.ledger.Sale(ctx, o.SaleID) // fresh: whose the money is

		if err != nil {
			return err
		}
		charge := ""
		if m, ok := seckill.ChargeMovement(o, sale.MerchantID, s.cfg.FeeBps, now); ok {
			if _, _, err := s.wallets.Move(ctx, m); err != nil {
				return err
			}
			charge = m.ID
		}
		if _, err := s.ledger.SetPaid(ctx, id, charge, now); err != nil {
			return err
		}
		t := now.UTC()
		o.Status, o.PaidAt, o.ChargeID = seckill.OrderPaid, &t, charge
		return nil
	})
	return o, err
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
