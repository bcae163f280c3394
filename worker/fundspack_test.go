package worker

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
)

// movementEntry is outbox entry i of group g as funds.lua writes it: one
// movement, a charge with its fee.
func movementEntry(t *testing.T, g, i int) funds.Entry {
	t.Helper()
	o := seckill.Order{ID: fmt.Sprintf("o-%d-%d", g, i), UserID: fmt.Sprint("u", i), AmountCents: 1000 + int64(i), Qty: 1}
	m, _ := seckill.ChargeMovement(o, 7, 250, time.UnixMilli(1700000000000+int64(i)).UTC())
	s, err := funds.EncodeMovement(m)
	if err != nil {
		t.Fatal(err)
	}
	return funds.Entry{Group: g, Entry: rdb.Entry{ID: fmt.Sprintf("%d-0", i), Values: map[string]any{"e": s}}}
}

// TestPackMovements: movements of any groups travel in messages of up to
// Pack, in order; an entry that does not decode travels alone; every
// message decodes back to exactly its entries' movements, and
// approxMovements counts them.
func TestPackMovements(t *testing.T) {
	var entries []funds.Entry
	for i := range 8 {
		entries = append(entries, movementEntry(t, i%3, i))
	}
	entries[3].Values["e"] = "o-3|wallet:u3\nnot|a|transfer"
	entries[5].Values = map[string]any{"x": "no e at all"}
	msgs := packMovements(entries, 2)
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprint(m.refs))
	}
	want := []string{"[{0 0-0} {1 1-0}]", "[{2 2-0}]", "[{0 3-0}]", "[{1 4-0}]", "[{2 5-0}]", "[{0 6-0} {1 7-0}]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	for i, m := range msgs {
		ms, err := DecodeMovements(m.body)
		if i == 2 || i == 4 {
			if err == nil {
				t.Fatalf("unreadable entry decoded: %s", m.body)
			}
			continue
		}
		if err != nil || len(ms) != len(m.refs) || approxMovements(m.body) != len(m.refs) {
			t.Fatalf("message %d: %d movements (approx %d), %v; want %d", i, len(ms), approxMovements(m.body), err, len(m.refs))
		}
		for j, ref := range m.refs {
			var k int
			fmt.Sscanf(ref.id, "%d-0", &k)
			wantM, _ := entries[k].Movement()
			if !reflect.DeepEqual(ms[j], wantM) {
				t.Fatalf("message %d movement %d: %+v, want %+v", i, j, ms[j], wantM)
			}
		}
	}
}

func TestDecodeMovementsStrict(t *testing.T) {
	good := string(packMovements([]funds.Entry{movementEntry(t, 0, 1)}, 1)[0].body)
	for _, body := range []string{
		`[]`, `null`, `{}`, `"x"`, `[1]`, `["nonsense"]`, `[` + good[1:len(good)-1] + `,"a|b"]`, good + ` trailing`,
	} {
		if _, err := DecodeMovements([]byte(body)); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	if ms, err := DecodeMovements([]byte(good)); err != nil || len(ms) != 1 || len(ms[0].Transfers) != 2 {
		t.Errorf("%s: %+v, %v", good, ms, err)
	}
}
