package inventory

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill"
)

// Round trips of every record format: what is written reads back the
// same, and what is malformed is refused rather than read as zeros.

func TestAnswerRoundTrip(t *testing.T) {
	for _, c := range seckill.Codes() {
		a := seckill.Answer{Code: c, OrderID: "01ARZ3NDEKTSV4RRFFQ69G5FAV-7", Qty: 3, Remaining: 1_000_000}
		if c != seckill.CodeOK {
			a.OrderID = ""
		}
		got, err := decodeAnswer(encodeAnswer(a))
		if err != nil || got != a {
			t.Errorf("%s: %q reads back as %+v, %v", c, encodeAnswer(a), got, err)
		}
	}
	for _, bad := range []string{"", "ok", "ok|o|1", "ok|o|1|2|3", "nope|o|1|2", "ok|o|x|2", "ok|o|1|"} {
		if a, err := decodeAnswer(bad); err == nil {
			t.Errorf("%q read as %+v", bad, a)
		}
	}
}

func TestBatchDecoding(t *testing.T) {
	reply := "ok|o1|1|9\nsold_out||2|9\n9|"
	d, err := decodeBatch(reply, 2)
	want := seckill.Decision{Answers: []seckill.Answer{{Code: seckill.CodeOK, OrderID: "o1", Qty: 1, Remaining: 9},
		{Code: seckill.CodeSoldOut, Qty: 2, Remaining: 9}}, Available: 9}
	if err != nil || !reflect.DeepEqual(d, want) {
		t.Errorf("%q: %+v, %v", reply, d, err)
	}
	if d, err := decodeBatch("ended||1|0\n0|ended", 1); err != nil || d.Closed != seckill.CodeEnded {
		t.Errorf("closed sale: %+v, %v", d, err)
	}
	for _, bad := range []string{"9|", "ok|o1|1|9\nx|", "ok|o1|1|9\n9|closed", "bad|o1|1|9\n9|"} {
		if d, err := decodeBatch(bad, 1); err == nil {
			t.Errorf("%q read as %+v", bad, d)
		}
	}
	if _, err := decodeBatch("ok|o1|1|9\n9|", 2); err == nil {
		t.Error("one answer for two requests read")
	}
}

func TestOrderRecordRoundTrip(t *testing.T) {
	e := seckill.Event{OrderID: "01ARZ3NDEKTSV4RRFFQ69G5FAV-7", SaleID: 7, UserID: "u_01", Qty: 2, RequestID: "req-0001",
		PriceCents: 4999, At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	got, err := decodeOrder(7, e.OrderID, encodeOrder(e))
	if err != nil || got != e {
		t.Errorf("%q reads back as %+v, %v", encodeOrder(e), got, err)
	}
	// A record from before prices were kept.
	old, err := decodeOrder(7, e.OrderID, "u_01|2|req-0001|1764547200000")
	if err != nil || old.PriceCents != -1 || old.Qty != 2 {
		t.Errorf("four-field record: %+v, %v", old, err)
	}
	for _, bad := range []string{"", "u|2|r", "u|x|r|1", "u|2|r|1|p", "u|2|r|1|5|6"} {
		if o, err := decodeOrder(7, "o", bad); err == nil {
			t.Errorf("%q read as %+v", bad, o)
		}
	}
}

func TestOutboxRoundTrip(t *testing.T) {
	evs := []seckill.Event{
		{OrderID: "01ARZ3NDEKTSV4RRFFQ69G5FAV-7", SaleID: 7, UserID: "a", Qty: 1, RequestID: "req-0001", PriceCents: 0, At: 1},
		{OrderID: "01ARZ3NDEKTSV4RRFFQ69G5FAW-7", SaleID: 7, UserID: "b", Qty: 5, RequestID: "req-0002", PriceCents: 10_000_000_000, At: 2},
	}
	got, err := DecodeOutbox(EncodeOutbox(evs))
	if err != nil || !reflect.DeepEqual(got, evs) {
		t.Errorf("outbox entry reads back as %+v, %v", got, err)
	}
	for _, bad := range []map[string]any{{}, {"order_id": "x"}, {outboxField: ""}, {outboxField: "a|b"},
		{outboxField: "o|7|u|x|1|r|1"}, {outboxField: strings.Join([]string{"o|7|u|1|1|r|1", "o"}, "\n")}} {
		if evs, err := DecodeOutbox(bad); err == nil {
			t.Errorf("%v read as %+v", bad, evs)
		}
	}
}

func TestReplyDecoding(t *testing.T) {
	for _, tc := range []struct {
		reply string
		n     int
		code  seckill.Code
		vals  []string
	}{
		{"ok|7|1", 2, seckill.CodeOK, []string{"7", "1"}},
		{"sale_not_found||0", 2, seckill.CodeSaleNotFound, []string{"", "0"}},
		{"ended|ended", 1, seckill.CodeEnded, []string{"ended"}},
	} {
		c, vals, err := decodeReply(tc.reply, tc.n)
		if err != nil || c != tc.code || !reflect.DeepEqual(vals, tc.vals) {
			t.Errorf("%q: %v %v %v", tc.reply, c, vals, err)
		}
	}
	for _, bad := range []string{"", "7", "ok|7", "released|7|1"} {
		if c, _, err := decodeReply(bad, 2); err == nil {
			t.Errorf("%q read as %v", bad, c)
		}
	}
}

func TestSmallRecordsRoundTrip(t *testing.T) {
	if ch, d, err := decodeChallenge(encodeChallenge("00ff", 16)); err != nil || ch != "00ff" || d != 16 {
		t.Errorf("challenge: %q %d %v", ch, d, err)
	}
	if _, _, err := decodeChallenge("00ff"); err == nil {
		t.Error("a challenge without its difficulty read")
	}
	if tag, n, err := decodeMove("7.2|15"); err != nil || tag != "7.2" || n != 15 {
		t.Errorf("move: %q %d %v", tag, n, err)
	}
	for _, bad := range []string{"", "7.2", "|15", "7.2|x"} {
		if _, _, err := decodeMove(bad); err == nil {
			t.Errorf("move %q read", bad)
		}
	}
}
