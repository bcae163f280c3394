package seckill_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill"
)

func TestOrderIDs(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := seckill.NewOrderID(42)
		if seen[id] || id <= prev {
			t.Fatalf("id %q repeated or not increasing after %q", id, prev)
		}
		seen[id], prev = true, id
		if got := seckill.SaleOfOrder(id); got != 42 {
			t.Fatalf("SaleOf(%q) = %d", id, got)
		}
	}
	for _, bad := range []string{"", "42", "-42", "01ARZ3NDEKTSV4RRFFQ69G5FAV-", "01ARZ3NDEKTSV4RRFFQ69G5FAV-0",
		"01ARZ3NDEKTSV4RRFFQ69G5FAV-x", "01ARZ3NDEKTSV4RRFFQ69G5FAV-007", "short-7", "../etc/passwd"} {
		if got := seckill.SaleOfOrder(bad); got != 0 {
			t.Errorf("SaleOf(%q) = %d, want 0", bad, got)
		}
	}
}

func TestValidRequestID(t *testing.T) {
	for id, ok := range map[string]bool{
		"abcdefgh": true, "A-b_C-9-": true, strings.Repeat("x", 64): true,
		"abcdefg": false, strings.Repeat("x", 65): false, "abcdefgh\n": false, "abcdefgh\x00": false, "abc defg": false, "abcd|efg": false, "abcdéfgh": false,
	} {
		if seckill.ValidRequestID(id) != ok {
			t.Errorf("ValidRequestID(%q) = %v", id, !ok)
		}
	}
}

func TestSaleValidate(t *testing.T) {
	now := time.Now()
	good := seckill.Sale{Name: "n", Item: "i", PriceCents: 0, Total: 10, PerUserLimit: 10, StartsAt: now, EndsAt: now.Add(time.Minute), Buckets: 1}.WithDefaults()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		mod   func(*seckill.Sale)
	}{
		{"name", func(s *seckill.Sale) { s.Name = " " }},
		{"item", func(s *seckill.Sale) { s.Item = strings.Repeat("é", 201) }},
		{"price_cents", func(s *seckill.Sale) { s.PriceCents = -1 }},
		{"total", func(s *seckill.Sale) { s.Total = seckill.MaxTotal + 1 }},
		{"per_user_limit", func(s *seckill.Sale) { s.PerUserLimit = 11 }},
		{"buckets", func(s *seckill.Sale) { s.Buckets = 65 }},
		{"admit_per_second", func(s *seckill.Sale) { s.AdmitPerSecond = seckill.MaxAdmitPerSecond + 1 }},
		{"admit_per_second", func(s *seckill.Sale) { s.AdmitPerSecond = 0 }},
		{"queue_opens_at", func(s *seckill.Sale) { s.QueueOpensAt = s.StartsAt.Add(time.Millisecond) }},
		{"ends_at", func(s *seckill.Sale) { s.EndsAt = s.StartsAt }},
	}
	for _, tc := range tests {
		s := good
		tc.mod(&s)
		var ve *seckill.Error
		if err := s.Validate(); !errors.As(err, &ve) || ve.Code != seckill.CodeInvalid || ve.Fields[0].Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

func TestEventValidate(t *testing.T) {
	good := seckill.Event{OrderID: seckill.NewOrderID(3), SaleID: 3, UserID: "u1", Qty: 2, PriceCents: 5, RequestID: "request-1", At: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*seckill.Event){
		"other sale":  func(e *seckill.Event) { e.SaleID = 4 },
		"bad user":    func(e *seckill.Event) { e.UserID = "a|b" },
		"bad request": func(e *seckill.Event) { e.RequestID = "x" },
		"zero qty":    func(e *seckill.Event) { e.Qty = 0 },
		"no time":     func(e *seckill.Event) { e.At = 0 },
	} {
		e := good
		mod(&e)
		if e.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := good.Order(time.Minute, time.Now())
	if o.AmountCents != 10 || o.Status != seckill.OrderPending || o.ExpiresAt.Sub(o.CreatedAt) != time.Minute {
		t.Errorf("order from event: %+v", o)
	}
}

func TestPhaseAt(t *testing.T) {
	now := time.Now()
	base := seckill.Stock{Available: 3, Start: now.Add(-time.Minute), End: now.Add(time.Minute), Status: seckill.StatusActive}
	tests := []struct {
		name string
		mod  func(*seckill.Stock)
		want seckill.Phase
	}{
		{"active", func(*seckill.Stock) {}, "active"},
		{"scheduled", func(s *seckill.Stock) { s.Start = now.Add(time.Second) }, "scheduled"},
		{"sold out", func(s *seckill.Stock) { s.Available = 0 }, "sold_out"},
		{"paused", func(s *seckill.Stock) { s.Status = seckill.StatusPaused }, "paused"},
		{"ended by time", func(s *seckill.Stock) { s.End = now }, "ended"},
		{"ended by merchant", func(s *seckill.Stock) { s.Status = seckill.StatusEnded }, "ended"},
	}
	for _, tc := range tests {
		st := base
		tc.mod(&st)
		if got := st.PhaseAt(now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestApplyMovesTheQueueOpening: a start moved without a new
// queue_opens_at keeps the room's lead; one given is taken as it is.
func TestApplyMovesTheQueueOpening(t *testing.T) {
	start := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	sl := seckill.Sale{StartsAt: start, EndsAt: start.Add(time.Hour)}.WithDefaults()
	if !sl.QueueOpensAt.Equal(start.Add(-seckill.DefaultQueueLead)) || sl.AdmitPerSecond != seckill.DefaultAdmitPerSecond {
		t.Fatalf("defaults: opens %v, %d a second", sl.QueueOpensAt, sl.AdmitPerSecond)
	}
	later := start.Add(2 * time.Hour)
	if got := sl.Apply(seckill.SalePatch{StartsAt: &later}); !got.QueueOpensAt.Equal(later.Add(-seckill.DefaultQueueLead)) {
		t.Errorf("start moved: the room opens %v", got.QueueOpensAt)
	}
	opens := start.Add(-time.Minute)
	if got := sl.Apply(seckill.SalePatch{StartsAt: &later, QueueOpensAt: &opens}); !got.QueueOpensAt.Equal(opens) {
		t.Errorf("opening given: the room opens %v", got.QueueOpensAt)
	}
}
