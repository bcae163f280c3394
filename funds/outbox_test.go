package funds_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// TestPending: the groups whose outbox holds entries are listed, each
// once and in order, whether their entries are new or read and not yet
// acknowledged; once a group's entries are acknowledged it is no longer
// listed, and groups never written to are not either.
func TestPending(t *testing.T) {
	s, _ := newStore(t, 64, 1_000_000)
	ctx := context.Background()
	if gs, err := s.Pending(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("before any movement: pending %v, %v; want none", gs, err)
	}
	want := map[int]bool{}
	for i := range 10 {
		user := fmt.Sprint("pending-", i)
		if _, _, err := s.Move(ctx, seckill.CreditMovement(user, "r", 100, time.Now())); err != nil {
			t.Fatal(err)
		}
		want[s.Group(seckill.WalletOf(user))] = true
	}
	wantList := func() []int {
		var out []int
		for g := range want {
			out = append(out, g)
		}
		slices.Sort(out)
		return out
	}
	gs, err := s.Pending(ctx)
	if err != nil || !slices.Equal(gs, wantList()) {
		t.Fatalf("pending %v, %v; want %v", gs, err, wantList())
	}

	// Read by a relay, not yet acknowledged: still pending.
	read := map[int][]string{}
	for g := range want {
		es, err := s.ReadOutbox(ctx, g, "relay-a", rdb.OutboxNew, 100, -1)
		if err != nil || len(es) == 0 {
			t.Fatalf("read group %d: %d entries, %v", g, len(es), err)
		}
		for _, e := range es {
			read[g] = append(read[g], e.ID)
		}
	}
	if gs, err := s.Pending(ctx); err != nil || !slices.Equal(gs, wantList()) {
		t.Fatalf("read, unacknowledged: pending %v, %v; want %v", gs, err, wantList())
	}

	// Acknowledged: gone, group by group.
	first := wantList()[0]
	if err := s.AckOutbox(ctx, first, read[first]); err != nil {
		t.Fatal(err)
	}
	delete(want, first)
	if gs, err := s.Pending(ctx); err != nil || !slices.Equal(gs, wantList()) {
		t.Fatalf("one group acknowledged: pending %v, %v; want %v", gs, err, wantList())
	}
	for g := range want {
		if err := s.AckOutbox(ctx, g, read[g]); err != nil {
			t.Fatal(err)
		}
	}
	if gs, err := s.Pending(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("all acknowledged: pending %v, %v; want none", gs, err)
	}
}
