package worker

import (
	"fmt"
	"testing"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/inventory"
)

// entry is outbox entry i as buy.lua writes it, holding the orders of
// one call: one by default, or n.
func entry(i int, n ...int) inventory.OutboxEntry {
	evs := make([]seckill.Event, max(1, sum(n)))
	for j := range evs {
		k := 100*i + j
		evs[j] = seckill.Event{OrderID: fmt.Sprintf("01JDQ000000000000000000%03d-7", k), SaleID: 7, UserID: fmt.Sprint("u", k),
			Qty: 1, PriceCents: 100, RequestID: fmt.Sprintf("request-%04d", k), At: 1700000000000}
	}
	return inventory.OutboxEntry{Entry: rdb.Entry{ID: fmt.Sprintf("%d-0", i), Values: inventory.EncodeOutbox(evs)}}
}

func sum(n []int) (s int) {
	for _, v := range n {
		s += v
	}
	return s
}

// TestPack: events travel in messages of up to Pack, in stream order; an
// unreadable entry travels alone and breaks the run; every message decodes
// back to exactly its entries.
func TestPack(t *testing.T) {
	var entries []inventory.OutboxEntry
	for i := range 8 {
		entries = append(entries, entry(i))
	}
	entries[3].Values["e"] = "01JDQ00000000000000000000003-7|7|u3|lots|100|request-0003|1700000000000"
	msgs := pack(entries, 3)
	var got [][]string
	for _, m := range msgs {
		got = append(got, m.ids)
	}
	want := [][]string{{"0-0", "1-0", "2-0"}, {"3-0"}, {"4-0", "5-0", "6-0"}, {"7-0"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	for i, m := range msgs {
		evs, err := DecodeEvents(m.body)
		if i == 1 {
			if err == nil {
				t.Fatalf("unreadable entry decoded: %s", m.body)
			}
			continue
		}
		if err != nil || len(evs) != len(m.ids) {
			t.Fatalf("message %d: %d events, %v", i, len(evs), err)
		}
		if approxEvents(m.body) != len(m.ids) {
			t.Fatalf("message %d: approxEvents %d, want %d", i, approxEvents(m.body), len(m.ids))
		}
	}
}

// TestPackKeepsEntriesWhole: an entry holds one call's orders; a message
// takes whole entries until it has Pack events or more, and one bad line
// sends its whole entry alone.
func TestPackKeepsEntriesWhole(t *testing.T) {
	entries := []inventory.OutboxEntry{entry(0, 2), entry(1, 2), entry(2, 5), entry(3, 1), entry(4, 3), entry(5, 1)}
	entries[4].Values["e"] = entries[4].Values["e"].(string) + "\nnot|an|event"
	msgs := pack(entries, 3)
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprint(m.ids, m.events))
	}
	want := []string{"[0-0 1-0] 4", "[2-0] 5", "[3-0] 1", "[4-0] 1", "[5-0] 1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	if evs, err := DecodeEvents(msgs[0].body); err != nil || len(evs) != 4 || evs[3].OrderID != "01JDQ000000000000000000101-7" {
		t.Fatalf("first message: %+v, %v", evs, err)
	}
}

func TestDecodeEventsStrict(t *testing.T) {
	good := string(pack([]inventory.OutboxEntry{entry(1)}, 1)[0].body)
	for _, body := range []string{
		`[]`, `{}`, `[` + good[1:len(good)-1] + `,{"order_id":"x"}]`, `[{"surprise":1}]`, `nonsense`,
		good[1:len(good)-1] + ` trailing`,
	} {
		if _, err := DecodeEvents([]byte(body)); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	for _, body := range []string{good, good[1 : len(good)-1]} {
		if evs, err := DecodeEvents([]byte(body)); err != nil || len(evs) != 1 {
			t.Errorf("%s: %v", body, err)
		}
	}
}
