package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill"
)

// roomSale warms a sale with a waiting room whose queue opens at opens and
// whose sale runs from start for a day.
func (e *env) roomSale(t testing.TB, total, rate int64, opens, start time.Time) int64 {
	t.Helper()
	e.next++
	_, err := e.inv.Warm(context.Background(), seckill.Sale{
		ID: e.next, Total: total, PerUserLimit: 1, PriceCents: 250, Buckets: 1, Status: seckill.StatusActive,
		StartsAt: start, EndsAt: start.Add(24 * time.Hour), WaitingRoom: true, QueueOpensAt: opens, AdmitPerSecond: rate,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.next
}

func (e *env) join(t testing.TB, sale int64, user string, at time.Time) seckill.Queue {
	t.Helper()
	q, err := e.inv.JoinQueue(context.Background(), sale, user, at, false)
	if err != nil {
		t.Fatalf("%s joins at %v: %v", user, at, err)
	}
	return q
}

func (e *env) read(t testing.TB, sale int64, user string, at time.Time) seckill.Queue {
	t.Helper()
	q, err := e.inv.ReadQueue(context.Background(), sale, user, at, false)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// spearman is the rank correlation of two orderings of the same n items:
// a[i] and b[i] are item i's ranks (0 to n-1, no ties).
func spearman(a, b []int) float64 {
	n := float64(len(a))
	var d2 float64
	for i := range a {
		d := float64(a[i] - b[i])
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// ranks turns places (distinct, any range) into ranks 0 to n-1.
func ranks(places []int64) []int {
	idx := make([]int, len(places))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return int(places[x] - places[y]) })
	out := make([]int, len(places))
	for r, i := range idx {
		out[i] = r
	}
	return out
}

// TestWaitingRoomFairness: 2,000 shoppers join the pre-queue one after the
// other, half of them ten minutes before the start, half one second
// before it; after the start their places bear no relation to when they
// came (Spearman within ±0.1), and a late one is ahead of an early one
// about half the time (over all the million pairs). 500 more joining
// after the start line up behind them in arrival order. Joining again
// keeps the place.
func TestWaitingRoomFairness(t *testing.T) {
	e := newEnv(t)
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sale := e.roomSale(t, 10, 100, start.Add(-15*time.Minute), start)
	const early, late = 2000, 500
	users := make([]string, early+late)
	for i := range users {
		users[i] = fmt.Sprintf("user-%05d", i)
	}
	for i, u := range users[:early] {
		at := start.Add(-10 * time.Minute).Add(time.Duration(i) * time.Millisecond)
		if i >= early/2 {
			at = start.Add(-time.Second).Add(time.Duration(i-early/2) * 100 * time.Microsecond)
		}
		if q := e.join(t, sale, u, at); q.Place < 1 || q.Place > int64(i+1) || q.Size != int64(i+1) || q.AdmittedThrough != 0 {
			t.Fatalf("%s joins: %+v", u, q)
		}
	}
	for i, u := range users[early:] {
		at := start.Add(time.Duration(i) * time.Millisecond)
		if q := e.join(t, sale, u, at); q.Place != int64(early+i+1) {
			t.Fatalf("%s joins after the start at place %d, want %d", u, q.Place, early+i+1)
		}
	}
	after := start.Add(time.Second)
	places := make([]int64, len(users))
	for i, u := range users {
		places[i] = e.read(t, sale, u, after).Place
	}
	if again := e.join(t, sale, users[7], after); again.Place != places[7] || again.Size != early+late {
		t.Errorf("joining again: %+v, was place %d", again, places[7])
	}

	order := make([]int, early)
	for i := range order {
		order[i] = i
	}
	rho := spearman(order, ranks(places[:early]))
	t.Logf("pre-queue: Spearman ρ(join order, place) = %+.4f over %d", rho, early)
	if math.Abs(rho) > 0.1 {
		t.Errorf("pre-queue places follow the join order: ρ = %.3f", rho)
	}
	ahead := 0
	for _, lp := range places[early/2 : early] {
		for _, ep := range places[:early/2] {
			if lp < ep {
				ahead++
			}
		}
	}
	share := float64(ahead) / float64(early/2*early/2)
	t.Logf("a shopper joining 1 s before the start is ahead of one joining 10 min before in %.1f%% of %d pairs", 100*share, early/2*early/2)
	if share < 0.45 || share > 0.55 {
		t.Errorf("late joiners ahead in %.3f of the pairs, want about half", share)
	}
	for _, p := range places[:early] {
		if p > early {
			t.Fatalf("an early joiner at place %d, behind the late ones", p)
		}
	}
	lateOrder := make([]int, late)
	for i := range lateOrder {
		lateOrder[i] = i
	}
	rhoLate := spearman(lateOrder, ranks(places[early:]))
	t.Logf("after the start: Spearman ρ(arrival, place) = %+.4f over %d", rhoLate, late)
	if rhoLate < 0.95 {
		t.Errorf("after the start, places do not follow arrival: ρ = %.3f", rhoLate)
	}
	if slices.Contains(places, 0) {
		t.Error("a joined shopper has no place")
	}
}

// TestWaitingRoomAdmitsAtTheRate: from the start the room admits
// admit_per_second places a second from the clock, whoever asks and how
// often, two callers with clocks 30 ms apart included; time with the queue
// empty banks nothing; a paused or sold-out sale admits nobody.
func TestWaitingRoomAdmitsAtTheRate(t *testing.T) {
	e := newEnv(t)
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	const rate = 250
	sale := e.roomSale(t, 100, rate, start.Add(-time.Minute), start)
	for i := range 10_000 {
		e.join(t, sale, fmt.Sprintf("u%05d", i), start.Add(-30*time.Second))
	}
	// Steps of 7 to 70 ms over 30 s, alternating between two callers.
	var at time.Duration
	for i := 0; at < 30*time.Second; i++ {
		at += time.Duration(7+(i*37)%64) * time.Millisecond
		skew := time.Duration(i%2) * 30 * time.Millisecond
		q := e.read(t, sale, "", start.Add(at-skew))
		want := int64(rate * (at - 30*time.Millisecond).Seconds())
		if q.AdmittedThrough < want-1 || q.AdmittedThrough > int64(rate*at.Seconds()) {
			t.Fatalf("at %v: %d admitted, want %d to %d", at, q.AdmittedThrough, want, int64(rate*at.Seconds()))
		}
	}
	// A process whose clock runs behind joins someone after the start: he
	// lines up at the end, not at a drawn place among those let in.
	if q := e.join(t, sale, "behind", start.Add(-500*time.Millisecond)); q.Place != 10_001 {
		t.Errorf("a join after the start from a clock behind it: place %d, want 10001 (the end)", q.Place)
	}
	q := e.read(t, sale, "", start.Add(30*time.Second))
	t.Logf("after 30 s at %d a second: %d admitted (%.2f%% of the rate)", rate, q.AdmittedThrough, 100*float64(q.AdmittedThrough)/(30*rate))

	// The rest is admitted at 41 s; the next minute with nobody waiting
	// banks nothing: a newcomer waits her turn at the rate.
	if q := e.read(t, sale, "", start.Add(41*time.Second)); q.AdmittedThrough != 10_001 {
		t.Fatalf("at 40 s: %+v", q)
	}
	e.read(t, sale, "", start.Add(100*time.Second))
	for i := range 100 {
		e.join(t, sale, fmt.Sprintf("n%03d", i), start.Add(100*time.Second))
	}
	if q := e.read(t, sale, "n099", start.Add(100*time.Second+200*time.Millisecond)); q.AdmittedThrough != 10_051 || q.Place != 10_101 {
		t.Errorf("200 ms after 100 newcomers: %+v, want 50 of them admitted", q)
	}

	// A paused sale admits nobody, and resumes where it was.
	ctx := context.Background()
	if _, err := e.inv.SetStatus(ctx, sale, seckill.ActionPause); err != nil {
		t.Fatal(err)
	}
	if q := e.read(t, sale, "", start.Add(101*time.Second)); q.AdmittedThrough != 10_051 {
		t.Errorf("paused: %d admitted, want 10051", q.AdmittedThrough)
	}
	if _, err := e.inv.SetStatus(ctx, sale, seckill.ActionResume); err != nil {
		t.Fatal(err)
	}
	if q := e.read(t, sale, "", start.Add(101*time.Second+100*time.Millisecond)); q.AdmittedThrough != 10_076 {
		t.Errorf("resumed: %d admitted, want 10076", q.AdmittedThrough)
	}
	// Sold out: nobody more is admitted, nobody more joins.
	q, err := e.inv.ReadQueue(ctx, sale, "", start.Add(102*time.Second), true)
	if err != nil || !q.SoldOut || q.AdmittedThrough != 10_076 {
		t.Errorf("sold out: %+v, %v", q, err)
	}
	if _, err := e.inv.JoinQueue(ctx, sale, "latecomer", start.Add(102*time.Second), true); !errors.Is(err, seckill.ErrSoldOut) {
		t.Errorf("joining a sold-out room: %v", err)
	}
}

// TestWaitingRoomRefusals: no joining before the queue opens or after the
// end, no room on a sale without one, a missing sale is missing; the keys
// expire with the sale's.
func TestWaitingRoomRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sale := e.roomSale(t, 5, 10, start.Add(-time.Minute), start)
	for name, c := range map[string]struct {
		at   time.Time
		want error
	}{
		"before the queue opens": {start.Add(-time.Minute - time.Millisecond), seckill.ErrNotStarted},
		"after the end":          {start.Add(25 * time.Hour), seckill.ErrEnded},
	} {
		if _, err := e.inv.JoinQueue(ctx, sale, "alice", c.at, false); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	plain := e.mustSale(t, 5, 1, time.Hour, 2*time.Hour)
	if _, err := e.inv.JoinQueue(ctx, plain, "alice", time.Now(), false); seckill.CodeOf(err) != seckill.CodeNotFound {
		t.Errorf("a sale without a room: %v", err)
	}
	if _, err := e.inv.JoinQueue(ctx, 987654321, "alice", time.Now(), false); !errors.Is(err, seckill.ErrSaleNotFound) {
		t.Errorf("no such sale: %v", err)
	}
	e.join(t, sale, "alice", start.Add(-time.Second))
	for _, k := range []string{e.keys.Queue(sale), e.keys.Room(sale)} {
		exp, err := e.rdb.PExpireTime(ctx, k).Result()
		if err != nil || exp <= 0 || time.UnixMilli(int64(exp/time.Millisecond)).Before(start.Add(24*time.Hour)) {
			t.Errorf("%s expires at %v (%v), want after the sale's end", k, exp, err)
		}
	}
}
