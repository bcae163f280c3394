package funds_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/system/servertest"
)

// newStore is a store on the suite's Redis (a cluster under
// SECKILL_TEST_REDIS=cluster) with keys of the test's own.
func newStore(t *testing.T, groups int, walletMax int64) (*funds.Store, rdb.Client) {
	t.Helper()
	cfg := servertest.Config(t)
	c := servertest.Redis(t, cfg)
	return funds.New(c, funds.Config{Prefix: cfg.Redis.Prefix, Groups: groups, WalletMax: walletMax}), c
}

func credit(user, req string, cents int64) seckill.Movement {
	return seckill.CreditMovement(user, req, cents, time.Now())
}

func order(id, user string, cents int64) seckill.Order {
	return seckill.Order{ID: id, UserID: user, AmountCents: cents, Qty: 1, UnitPriceCents: cents}
}

// TestConcurrentChargesNeverOverdraw: 400 charges of 30 cents race on a
// wallet holding 1,000: exactly 33 are made, the rest refused for
// insufficient funds, and the wallet ends at 10; every charge retried
// answers as the first time and moves nothing more.
func TestConcurrentChargesNeverOverdraw(t *testing.T) {
	s, _ := newStore(t, 16, 1_000_000)
	ctx := context.Background()
	if _, _, err := s.Move(ctx, credit("alice", "seed-1", 1000)); err != nil {
		t.Fatal(err)
	}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		made, broke int
		unexpected  []error
		madeOrders  []seckill.Order
	)
	for i := range 400 {
		wg.Go(func() {
			o := order(fmt.Sprintf("o-%03d", i), "alice", 30)
			m, _ := seckill.ChargeMovement(o, 7, 250, time.Now())
			_, ok, err := s.Move(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && ok:
				made++
				madeOrders = append(madeOrders, o)
			case errors.Is(err, seckill.ErrInsufficientFunds):
				broke++
			default:
				unexpected = append(unexpected, err)
			}
		})
	}
	wg.Wait()
	if len(unexpected) > 0 || made != 33 || broke != 367 {
		t.Fatalf("made %d, refused %d, other %v; want 33 and 367", made, broke, unexpected)
	}
	if b, err := s.Balance(ctx, seckill.WalletOf("alice")); err != nil || b != 10 {
		t.Fatalf("alice holds %d (%v), want 10", b, err)
	}
	for _, o := range madeOrders {
		m, _ := seckill.ChargeMovement(o, 7, 250, time.Now())
		if b, ok, err := s.Move(ctx, m); err != nil || ok || b != 10 {
			t.Fatalf("a retry of %s: balance %d, made %v, %v", o.ID, b, ok, err)
		}
		other := m
		other.Transfers = append([]seckill.Transfer(nil), m.Transfers...)
		other.Transfers[0].Amount++
		if _, _, err := s.Move(ctx, other); seckill.CodeOf(err) != seckill.CodeInvalid {
			t.Fatalf("the same id for another sum: %v, want invalid_request", err)
		}
	}
}

// TestFollowOnceAndConservation: the merchant and the platform get their
// shares of each made charge once, however often Follow runs, and every
// account adds up to zero with the provider's.
func TestFollowOnceAndConservation(t *testing.T) {
	s, _ := newStore(t, 8, 1_000_000)
	ctx := context.Background()
	top := seckill.TopupMovement("t1", "bob", 10_000, time.Now())
	if _, _, err := s.Move(ctx, top); err != nil {
		t.Fatal(err)
	}
	charge, _ := seckill.ChargeMovement(order("o1", "bob", 9_999), 3, 250, time.Now())
	if _, _, err := s.Move(ctx, charge); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for _, m := range []seckill.Movement{top, charge} {
			if err := s.Follow(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := s.Balances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fee := seckill.Fee(9_999, 250) // 249.975 rounded down
	want := map[seckill.FundsAccount]int64{
		seckill.WalletOf("bob"): 1, seckill.MerchantAccountOf(3): 9_999 - fee, seckill.PlatformAccount: fee,
		seckill.ProviderAccount: -10_000,
	}
	var sum int64
	for a, n := range all {
		sum += n
		if want[a] != n {
			t.Errorf("%s holds %d, want %d", a, n, want[a])
		}
	}
	if sum != 0 || fee != 249 {
		t.Errorf("the accounts add up to %d, want 0 (fee %d)", sum, fee)
	}
}

// TestCancelBeforeAndAfter: a void racing its charge ends charged and
// reversed, or never charged, whichever comes first, never both and never
// neither; the wallet's ceiling refuses a top-up over it; amounts near
// the bound stay exact.
func TestCancelBeforeAndAfter(t *testing.T) {
	s, _ := newStore(t, 4, seckill.MaxAmountCents)
	ctx := context.Background()
	if _, _, err := s.Move(ctx, seckill.TopupMovement("t", "carol", 500, time.Now())); err != nil {
		t.Fatal(err)
	}
	// Cancelled first: the charge can never be made after.
	early := order("early", "carol", 100)
	if made, err := s.Cancel(ctx, seckill.WalletOf("carol"), seckill.ChargeID(early.ID), time.Now()); err != nil || made {
		t.Fatalf("cancel before the charge: made %v, %v", made, err)
	}
	m, _ := seckill.ChargeMovement(early, 3, 0, time.Now())
	if _, _, err := s.Move(ctx, m); !errors.Is(err, seckill.ErrOrderCancelled) {
		t.Fatalf("a charge after its cancel: %v, want order_cancelled", err)
	}
	// Charged first: the cancel reverses it, once.
	late := order("late", "carol", 200)
	m, _ = seckill.ChargeMovement(late, 3, 500, time.Now())
	if b, _, err := s.Move(ctx, m); err != nil || b != 300 {
		t.Fatalf("charge: %d %v", b, err)
	}
	for i := range 2 {
		made, err := s.Cancel(ctx, seckill.WalletOf("carol"), seckill.ChargeID(late.ID), time.Now())
		if err != nil || made != (i == 0) {
			t.Fatalf("cancel %d after the charge: made %v, %v", i, made, err)
		}
	}
	if b, _ := s.Balance(ctx, seckill.WalletOf("carol")); b != 500 {
		t.Fatalf("carol holds %d after the void, want 500", b)
	}
	// The reversal undoes the charge exactly, fee and all, once followed.
	entries, err := s.Outbox(ctx, s.Group(seckill.WalletOf("carol")))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		mv, err := e.Movement()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Follow(ctx, mv); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []seckill.FundsAccount{seckill.MerchantAccountOf(3), seckill.PlatformAccount} {
		if b, _ := s.Balance(ctx, a); b != 0 {
			t.Errorf("%s holds %d after the charge and its void, want 0", a, b)
		}
	}
	// The ceiling, and exactness near it.
	big := int64(seckill.MaxAmountCents - 500)
	if b, _, err := s.Move(ctx, seckill.TopupMovement("big", "carol", big, time.Now())); err != nil || b != seckill.MaxAmountCents {
		t.Fatalf("top-up to the bound: %d %v", b, err)
	}
	if _, _, err := s.Move(ctx, seckill.TopupMovement("over", "carol", 1, time.Now())); !errors.Is(err, seckill.ErrBalanceLimit) {
		t.Fatalf("a top-up over the ceiling: %v", err)
	}
	if b, _ := s.Balance(ctx, seckill.WalletOf("carol")); b != seckill.MaxAmountCents {
		t.Fatalf("carol holds %d, want %d", b, int64(seckill.MaxAmountCents))
	}
}

// TestChargeRacesCancel: 300 orders, each charged and cancelled at the
// same moment from two goroutines: each ends charged-and-reversed or
// never charged, never both and never neither, and the wallet holds what
// it held.
func TestChargeRacesCancel(t *testing.T) {
	s, _ := newStore(t, 8, 10_000_000)
	ctx := context.Background()
	wallet := seckill.WalletOf("dave")
	if _, _, err := s.Move(ctx, seckill.TopupMovement("seed", "dave", 1_000_000, time.Now())); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	charged := make([]bool, 300)
	reversed := make([]bool, 300)
	for i := range 300 {
		o := order(fmt.Sprintf("race-%03d", i), "dave", 100+int64(i))
		m, _ := seckill.ChargeMovement(o, 5, 300, time.Now())
		wg.Go(func() {
			_, made, err := s.Move(ctx, m)
			if err != nil && !errors.Is(err, seckill.ErrOrderCancelled) {
				t.Errorf("charge %s: %v", o.ID, err)
			}
			charged[i] = made
		})
		wg.Go(func() {
			made, err := s.Cancel(ctx, wallet, m.ID, time.Now())
			if err != nil {
				t.Errorf("cancel %s: %v", o.ID, err)
			}
			reversed[i] = made
		})
	}
	wg.Wait()
	both := 0
	for i := range 300 {
		if charged[i] != reversed[i] {
			t.Errorf("order %d: charged %v, reversed %v", i, charged[i], reversed[i])
		}
		if charged[i] {
			both++
		}
	}
	if b, _ := s.Balance(ctx, wallet); b != 1_000_000 {
		t.Errorf("dave holds %d, want 1000000", b)
	}
	t.Logf("%d of 300 charged then reversed, %d cancelled first", both, 300-both)
}

// TestMoveKeeping: a debit that would leave its side less than what it
// must keep is refused and changes nothing; one that leaves enough is
// made.
func TestMoveKeeping(t *testing.T) {
	s, _ := newStore(t, 4, 1_000_000)
	ctx := context.Background()
	if _, _, err := s.Move(ctx, credit("keeper", "seed-1", 1000)); err != nil {
		t.Fatal(err)
	}
	m, _ := seckill.ChargeMovement(order("o-keep", "keeper", 600), 7, 0, time.Now())
	if _, _, err := s.MoveKeeping(ctx, m, 401); !errors.Is(err, seckill.ErrInsufficientFunds) {
		t.Fatalf("leaving 400 of 401 to keep: %v, want insufficient_funds", err)
	}
	if b, ok, err := s.MoveKeeping(ctx, m, 400); err != nil || !ok || b != 400 {
		t.Fatalf("leaving 400 of 400 to keep: balance %d, made %v, %v", b, ok, err)
	}
}

// TestFollowABatch: one Follow of 600 charges (of 300 wallets, to two
// merchants, more shares to a group than one call applies) and their
// refunds, the batch listing some movements twice and asked three times
// over, gives each account its shares once: the merchants and the
// platform hold what the charges less the refunds left them, every
// account adds up to zero.
func TestFollowABatch(t *testing.T) {
	s, _ := newStore(t, 4, 1_000_000)
	ctx := context.Background()
	var batch []seckill.Movement
	var fees, refunded int64
	for i := range 600 {
		user := fmt.Sprintf("batch-%d", i%300)
		if i < 300 {
			top := seckill.TopupMovement(fmt.Sprint("bt-", i), user, 10_000, time.Now())
			if _, _, err := s.Move(ctx, top); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, top)
		}
		charge, _ := seckill.ChargeMovement(order(fmt.Sprint("bo-", i), user, 1_000+int64(i)), int64(1+i%2), 250, time.Now())
		if _, _, err := s.Move(ctx, charge); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, charge)
		if i%10 == 0 { // refunded: decided on the merchant, once it holds the charge
			refund := seckill.RefundOf(charge, time.Now())
			if err := s.Follow(ctx, charge); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Move(ctx, refund); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, refund)
			refunded += 1_000 + int64(i)
		} else {
			fees += seckill.Fee(1_000+int64(i), 250)
		}
	}
	batch = append(batch, batch[:50]...) // listed twice
	for range 3 {
		if err := s.Follow(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Balances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum, charged int64
	for i := range 600 {
		charged += 1_000 + int64(i)
	}
	for _, n := range all {
		sum += n
	}
	merchants := all[seckill.MerchantAccountOf(1)] + all[seckill.MerchantAccountOf(2)]
	if sum != 0 || all[seckill.PlatformAccount] != fees || merchants != charged-refunded-fees ||
		all[seckill.ProviderAccount] != -300*10_000 {
		t.Errorf("after the batch: sum %d, platform %d (want %d), merchants %d (want %d), provider %d",
			sum, all[seckill.PlatformAccount], fees, merchants, charged-refunded-fees, all[seckill.ProviderAccount])
	}
}
