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
	list, err := s.ledger.UserOrders(ctx, user, orderListLimit)
	for i := range list {
		list[i] = s.shown(ctx, list[i])
	}
	return list, err
}

// charged is order o as its owner sees it: paid once its charge is made
// in Redis, though the ledger shows it pending until the funds consumer
// writes the charge (a few milliseconds).
func (s *Service) charged(ctx context.Context, o seckill.Order) (seckill.Order, error) {
	if o.Status != seckill.OrderPending || o.AmountCents <= 0 {
		return o, nil
	}
	made, err := s.wallets.Made(ctx, seckill.WalletOf(o.UserID), seckill.ChargeID(o.ID))
	if made {
		o.Status, o.ChargeID = seckill.OrderPaid, seckill.ChargeID(o.ID)
	}
	return o, err
}

// shown is order o as its owner sees it (charged), or as the ledger holds
// it when Redis cannot say: a read does not fail for want of the overlay.
func (s *Service) shown(ctx context.Context, o seckill.Order) seckill.Order {
	if c, err := s.charged(ctx, o); err == nil {
		return c
	}
	return o
}

// Order returns one of user's orders: from the ledger, or, accepted but
// not written there yet, from its sale's record in Redis (PersistedAt is
// zero then). Another user's order is seckill.ErrOrderNotFound, as an
// unknown one.
func (s *Service) Order(ctx context.Context, id, user string) (seckill.Order, error) {
	o, err := s.ledger.Order(ctx, id)
	switch {
	case err == nil && o.UserID == user:
		return s.shown(ctx, o), nil
	case err == nil:
		return seckill.Order{}, seckill.ErrOrderNotFound
	case !errors.Is(err, seckill.ErrOrderNotFound):
		return seckill.Order{}, err
	}
	o, err = s.unpersisted(ctx, id, user)
	if err != nil {
		return o, err
	}
	return s.shown(ctx, o), nil // paid before it reached the ledger
}

// unpersisted finds an order in its sale's Redis record of accepted
// orders.
func (s *Service) unpersisted(ctx context.Context, id, user string) (seckill.Order, error) {
	sale := seckill.SaleOfOrder(id)
	if sale == 0 {
		return seckill.Order{}, seckill.ErrOrderNotFound
	}
	e, _, ok, err := s.stock.Charging(ctx, sale, id, user)
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
	if u, err := s.unpersisted(ctx, id, user); err != nil || u.Status == seckill.OrderPaid {
		return u, err // an instant checkout's is paid in its buy
	}
	if err := s.awaitPersisted(ctx, id); err != nil {
		return o, err
	}
	return s.pay(ctx, id, user)
}

// pay pays an order. One with an amount is decided as a buy is, in
// Redis: its charge (funds.lua, on the buyer's wallet, idempotent by the
// order's id) answers, and the funds consumer sets the order paid in the
// transaction that writes the charge to the ledger (or the order
// consumer, if the charge got there first). The payment timeout asks
// Redis first (funds.Store.Close): a charge made means paid; none, and
// none can be made any more, then it cancels. So an order ends
// paid-and-charged or cancelled-and-uncharged, and a payment costs no
// MySQL transaction of its own. A first payment in its window reads
// nothing from MySQL either (payNew); the rest (a retry, a late or free
// order, keys Redis no longer holds) read the ledger's order. A free
// order (nothing to charge) is set paid in the ledger under its row lock,
// which the timeout's cancel waits for.
func (s *Service) pay(ctx context.Context, id, user string) (seckill.Order, error) {
	if o, done, err := s.payNew(ctx, id, user); done {
		return o, err
	}
	o, err := s.ledger.Order(ctx, id)
	if err != nil {
		return o, err
	}
	err = s.payable(o, user)
	if errors.Is(err, seckill.ErrPaymentExpired) {
		// Its charge may have been made in its window, the ledger not
		// showing it yet.
		if o, err = s.charged(ctx, o); err == nil && o.Status != seckill.OrderPaid {
			err = seckill.ErrPaymentExpired
		}
	}
	if err != nil || o.Status == seckill.OrderPaid {
		return o, err
	}
	if o.AmountCents <= 0 {
		return s.payFree(ctx, id, user)
	}
	sale, err := s.ledger.Sale(ctx, o.SaleID) // fresh: whose the money is
	if err != nil {
		return o, err
	}
	now := s.now()
	m, _ := seckill.ChargeMovement(o, sale.MerchantID, s.cfg.FeeBps, now)
	if _, _, err := s.wallets.Move(ctx, m); err != nil {
		if seckill.CodeOf(err) == seckill.CodeInvalid {
			// Charged before with another split (the fee or the sale's
			// merchant changed since): paid all the same.
			if paid, cerr := s.charged(ctx, o); cerr == nil && paid.Status == seckill.OrderPaid {
				return paid, nil
			}
		}
		return o, err
	}
	t := now.UTC()
	o.Status, o.PaidAt, o.ChargeID = seckill.OrderPaid, &t, m.ID
	return o, nil
}

// payNew pays an order from what its sale's Redis keys hold: the order as
// buy.lua accepted it and whose sale it is (Stock.Charging), in one round
// trip, then its charge. done is false when that cannot decide: the keys
// are gone or older than the merchant field, the order is free or its
// window closed, or its charge was made before (a retry: the ledger says
// whether the order was refunded since), or it is an instant checkout's
// (paid in its buy, never charged here: the ledger writes it paid). A
// cancelled order's charge finds the timeout's barrier
// (funds.Store.Close), so Redis refuses it.
func (s *Service) payNew(ctx context.Context, id, user string) (o seckill.Order, done bool, err error) {
	sale := seckill.SaleOfOrder(id)
	if sale == 0 {
		return o, false, nil
	}
	e, merchant, ok, err := s.stock.Charging(ctx, sale, id, user)
	if err != nil || !ok || merchant < 0 || e.PriceCents <= 0 || e.Instant() {
		return o, err != nil, err
	}
	now := s.now()
	if o = e.Order(s.cfg.PaymentWindow, time.Time{}); !now.Before(o.ExpiresAt) {
		return o, false, nil
	}
	m, _ := seckill.ChargeMovement(o, merchant, s.cfg.FeeBps, now)
	_, made, err := s.wallets.Move(ctx, m)
	switch {
	case err == nil && !made, seckill.CodeOf(err) == seckill.CodeInvalid:
		return o, false, nil // charged before (with this split or another)
	case err != nil:
		return o, true, err
	}
	t := now.UTC()
	o.Status, o.PaidAt, o.ChargeID = seckill.OrderPaid, &t, m.ID
	return o, true, nil
}

// payable says why user may not pay order o (nil: it may, or o is paid).
func (s *Service) payable(o seckill.Order, user string) error {
	switch {
	case o.UserID != user:
		return seckill.ErrOrderNotFound // another user's order is as an unknown one
	case o.Status == seckill.OrderPaid:
		return nil
	case o.Status == seckill.OrderCancelled:
		return seckill.ErrOrderCancelled
	case o.Status == seckill.OrderRefunded:
		return seckill.ErrOrderRefunded
	case !s.now().Before(o.ExpiresAt):
		return seckill.ErrPaymentExpired
	}
	return nil
}

// payFree sets a free order paid, its row locked.
func (s *Service) payFree(ctx context.Context, id, user string) (seckill.Order, error) {
	var o seckill.Order
	err := s.ledger.InTx(ctx, func(ctx context.Context) error {
		var err error
		if o, err = s.ledger.OrderForUpdate(ctx, id); err != nil {
			return err
		}
		if err := s.payable(o, user); err != nil || o.Status == seckill.OrderPaid {
			return err
		}
		now := s.now()
		if _, err := s.ledger.SetPaid(ctx, id, "", now); err != nil {
			return err
		}
		t := now.UTC()
		o.Status, o.PaidAt = seckill.OrderPaid, &t
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
