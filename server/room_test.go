package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/signed"
	"github.com/seckill/seckill/room"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/tickets"
)

func queuePath(sale int64) string { return fmt.Sprintf("/api/sales/%d/queue", sale) }

func passBuy(rid, pass string) map[string]any {
	return map[string]any{"qty": 1, "request_id": rid, "pass": pass}
}

// admitted waits until tok's shopper is admitted to the sale's room and
// returns the pass.
func admitted(t *testing.T, st *stack, sale int64, tok string) string {
	t.Helper()
	var pass string
	servertest.WaitFor(t, 10*time.Second, "admission", func() (bool, string) {
		r := call(t, st.h, "GET", queuePath(sale), nil, bearer(tok))
		pass, _ = r.Body["pass"].(string)
		return r.Status == 200 && r.Body["status"] == "admitted" && pass != "" && r.Body["pass_expires_at"] != nil, r.String()
	})
	return pass
}

// countingHook counts the commands a Redis client sends, and its scripts.
type countingHook struct{ commands, scripts atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h *countingHook) count(cmd redis.Cmder) {
	h.commands.Add(1)
	if n := strings.ToLower(cmd.Name()); n == "evalsha" || n == "eval" {
		h.scripts.Add(1)
	}
}

// TestWaitingRoom: shoppers join before the start and wait (the same place
// when they join again); from the start they are admitted with a pass that
// serves their buys up to the cap. Buys without a good pass are refused
// with nothing changed, and none of them reaches Redis: 300 pass-less
// buys send no script and at most the rules' once-a-second read. A sale
// without a room has no queue and ignores the field.
func TestWaitingRoom(t *testing.T) {
	st := newStack(t)
	now := time.Now()
	start := now.Add(3 * time.Second)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 2, Start: start, WaitingRoom: true, AdmitPerSecond: 1000})
	other := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 2, WaitingRoom: true, AdmitPerSecond: 1000})
	plain := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 2})
	aliceID, bobID := "alice-"+servertest.Unique(), "bob-"+servertest.Unique()
	alice, bob := servertest.Token(t, aliceID), servertest.Token(t, bobID)

	if r := call(t, st.h, "GET", queuePath(sale.ID), nil, bearer(alice)); r.Status != 200 || r.Body["status"] != "not_in_queue" || num(r.Body, "place") != 0 {
		t.Fatalf("before joining: %v", r)
	}
	r := call(t, st.h, "POST", queuePath(sale.ID), nil, bearer(alice))
	if r.Status != 200 || r.Body["status"] != "waiting" || num(r.Body, "place") != 1 || num(r.Body, "eta_seconds") < 1 || r.Body["pass"] != nil {
		t.Fatalf("joining before the start: %v", r)
	}
	if r := call(t, st.h, "POST", queuePath(sale.ID), nil, bearer(alice)); num(r.Body, "place") != 1 || num(r.Body, "queue_size") != 1 {
		t.Fatalf("joining again: %v", r)
	}
	call(t, st.h, "POST", queuePath(sale.ID), nil, bearer(bob))
	if r := call(t, st.h, "GET", "/api/sales/"+fmt.Sprint(sale.ID), nil); r.Body["waiting_room"] != true || num(r.Body, "admit_per_second") != 1000 ||
		r.Body["queue_opens_at"] != start.UTC().Truncate(time.Millisecond).Add(-seckill.DefaultQueueLead).Format(time.RFC3339Nano) {
		t.Errorf("the sale's room settings: %v", r)
	}

	pass := admitted(t, st, sale.ID, alice)
	bobPass := admitted(t, st, sale.ID, bob)
	call(t, st.h, "POST", queuePath(other.ID), nil, bearer(alice))
	otherPass := admitted(t, st, other.ID, alice)
	key := room.Passes.Key(servertest.JWTSecret)
	expired := signed.Mint(key, aliceID, sale.ID, time.Now().Add(-time.Second))
	forged := signed.Mint([]byte("another key"), aliceID, sale.ID, time.Now().Add(time.Minute))
	ticketAsPass := signed.Mint(tickets.Tickets.Key(servertest.JWTSecret), aliceID, sale.ID, time.Now().Add(time.Minute))

	// Warm the rules' cache, then count what 300 pass-less buys send.
	call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "warm-up-01"), bearer(alice))
	hook := &countingHook{}
	st.Redis.AddHook(hook)
	began := time.Now()
	refusals := []struct {
		name string
		body any
		code string
	}{
		{"no pass", buyBody(1, "no-pass-01"), "pass_required"},
		{"empty pass", passBuy("empty-pass-1", ""), "pass_required"},
		{"garbage", passBuy("garbage-p-1", "not-a-pass"), "pass_invalid"},
		{"expired", passBuy("expired-p-1", expired), "pass_invalid"},
		{"signed with another key", passBuy("forged-p-1", forged), "pass_invalid"},
		{"a buy ticket", passBuy("ticket-p-01", ticketAsPass), "pass_invalid"},
		{"another sale's", passBuy("other-p-001", otherPass), "pass_invalid"},
		{"another user's", passBuy("bobs-pass-1", bobPass), "pass_invalid"},
		{"longer expiry, same signature", passBuy("longer-p-01", "9"+pass), "pass_invalid"},
	}
	for i := range 300 {
		rc := refusals[i%len(refusals)]
		r := call(t, st.h, "POST", buyPath(sale.ID), rc.body, bearer(alice))
		if r.Status != 403 || r.code() != rc.code {
			t.Fatalf("%s: %v, want 403 %s", rc.name, r, rc.code)
		}
	}
	secs := int64(time.Since(began)/time.Second) + 1
	if s, c := hook.scripts.Load(), hook.commands.Load(); s != 0 || c > secs {
		t.Errorf("300 buys without a good pass sent %d scripts and %d commands to Redis in %d s, want none and at most %d (the rules' read)", s, c, secs, secs)
	}
	t.Logf("300 pass-less buys: %d scripts, %d Redis commands (the rules' cache)", hook.scripts.Load(), hook.commands.Load())
	if got := available(t, st, sale.ID); got != 100 {
		t.Fatalf("refused buys changed the stock: %d left", got)
	}

	// The pass serves several buys, up to the cap.
	for i, want := range []int{200, 200, 409} {
		r := call(t, st.h, "POST", buyPath(sale.ID), passBuy(fmt.Sprintf("with-pass-%d", i), pass), bearer(alice))
		if r.Status != want {
			t.Fatalf("buy %d with the pass: %v, want %d", i, r, want)
		}
	}
	if r := call(t, st.h, "POST", buyPath(sale.ID), passBuy("bob-buys-01", bobPass), bearer(bob)); r.Status != 200 {
		t.Fatalf("bob with his pass: %v", r)
	}

	// A sale without a room: no queue; the field is ignored.
	if r := call(t, st.h, "POST", queuePath(plain.ID), nil, bearer(alice)); r.Status != 404 || r.code() != "not_found" {
		t.Errorf("queue of a sale without a room: %v", r)
	}
	if r := call(t, st.h, "POST", buyPath(plain.ID), passBuy("plain-pass-1", "not-a-pass"), bearer(alice)); r.Status != 200 {
		t.Errorf("buy on a sale without a room: %v", r)
	}
	if r := call(t, st.h, "POST", queuePath(sale.ID), nil); r.Status != 401 {
		t.Errorf("joining signed out: %v", r)
	}

	// The dashboard's figures.
	stats := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", sale.ID), nil, admin())
	q, _ := stats.Body["queue"].(map[string]any)
	if num(q, "size") != 2 || num(q, "admitted") != 2 || num(q, "joined_before_start") != 2 || num(q, "passes_used") != 2 || num(q, "admit_per_second") != 1000 {
		t.Errorf("stats queue: %v", stats)
	}
	if s := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", plain.ID), nil, admin()); s.Body["queue"] != nil {
		t.Errorf("stats of a sale without a room: %v", s)
	}
}

// TestWaitingRoomOpensAndSellsOut: nobody joins before the queue opens;
// once the stock is gone the room lets nobody more in, and tells those
// waiting; a sale with tickets and a room asks for both.
func TestWaitingRoomOpensAndSellsOut(t *testing.T) {
	st := newStack(t)
	now := time.Now()
	later := servertest.MustSale(t, st.srv, servertest.SaleSpec{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour),
		WaitingRoom: true, QueueOpens: now.Add(30 * time.Minute)})
	alice := servertest.Token(t, "alice-"+servertest.Unique())
	if r := call(t, st.h, "POST", queuePath(later.ID), nil, bearer(alice)); r.Status != 409 || r.code() != "not_started" {
		t.Errorf("joining before the queue opens: %v", r)
	}

	one := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 1, WaitingRoom: true, AdmitPerSecond: 1000, RequireTicket: true})
	call(t, st.h, "POST", queuePath(one.ID), nil, bearer(alice))
	pass := admitted(t, st, one.ID, alice)
	tk := getTicket(t, st, one.ID, alice, map[string]any{})
	for _, c := range []struct {
		name string
		body map[string]any
		code string
	}{
		{"a pass, no ticket", passBuy("pass-only-01", pass), "ticket_required"},
		{"a ticket, no pass", ticketBuy("ticket-only1", tk), "pass_required"},
	} {
		if r := call(t, st.h, "POST", buyPath(one.ID), c.body, bearer(alice)); r.Status != 403 || r.code() != c.code {
			t.Errorf("%s: %v, want 403 %s", c.name, r, c.code)
		}
	}
	both := map[string]any{"qty": 1, "request_id": "both-00001", "pass": pass, "ticket": tk}
	if r := call(t, st.h, "POST", buyPath(one.ID), both, bearer(alice)); r.Status != 200 {
		t.Fatalf("a pass and a ticket: %v", r)
	}
	bob := servertest.Token(t, "bob-"+servertest.Unique())
	servertest.WaitFor(t, 5*time.Second, "the room to close", func() (bool, string) {
		r := call(t, st.h, "POST", queuePath(one.ID), nil, bearer(bob))
		return r.Status == 409 && r.code() == "sold_out", r.String()
	})
	if r := call(t, st.h, "GET", queuePath(one.ID), nil, bearer(alice)); r.Body["status"] != "sold_out" || r.Body["pass"] != nil {
		t.Errorf("an admitted shopper after the sell-out: %v", r)
	}
}

// TestWaitingRoomSettings: the room's settings are checked as stored, and
// set up only before the start (the rate may change any time).
func TestWaitingRoomSettings(t *testing.T) {
	st := newStack(t)
	now := time.Now().UTC().Truncate(time.Second)
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"name": "Room", "item": "Thing", "price_cents": 100, "total": 10, "per_user_limit": 1,
			"starts_at": now.Add(time.Hour), "ends_at": now.Add(2 * time.Hour), "waiting_room": true}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for name, c := range map[string]struct {
		extra map[string]any
		field string
	}{
		"rate zero":          {map[string]any{"admit_per_second": 0}, "admit_per_second"},
		"rate too high":      {map[string]any{"admit_per_second": 100_001}, "admit_per_second"},
		"opens after start":  {map[string]any{"queue_opens_at": now.Add(61 * time.Minute)}, "queue_opens_at"},
		"opens in year 1":    {map[string]any{"queue_opens_at": "0001-01-01T00:00:00Z"}, "queue_opens_at"},
		"rate not a number":  {map[string]any{"admit_per_second": "fast"}, "admit_per_second"},
		"room not a boolean": {map[string]any{"waiting_room": 1}, "waiting_room"},
	} {
		r := call(t, st.h, "POST", "/admin/api/sales", body(c.extra), admin())
		if r.Status != 400 || r.code() != "invalid_request" || !strings.Contains(r.Raw, c.field) {
			t.Errorf("%s: %v", name, r)
		}
	}
	r := call(t, st.h, "POST", "/admin/api/sales", body(nil), admin())
	if r.Status != 201 || r.Body["waiting_room"] != true || num(r.Body, "admit_per_second") != 100 ||
		r.Body["queue_opens_at"] != now.Add(45*time.Minute).Format(time.RFC3339) {
		t.Fatalf("a sale with a room and its defaults: %v", r)
	}
	id := num(r.Body, "id")
	path := fmt.Sprintf("/admin/api/sales/%d", id)
	if r := call(t, st.h, "PATCH", path, map[string]any{"starts_at": now.Add(3 * time.Hour), "ends_at": now.Add(4 * time.Hour)}, admin()); r.Body["queue_opens_at"] != now.Add(165*time.Minute).Format(time.RFC3339) {
		t.Errorf("moving the start moves the room's opening: %v", r)
	}

	started := servertest.MustSale(t, st.srv, servertest.SaleSpec{WaitingRoom: true})
	spath := fmt.Sprintf("/admin/api/sales/%d", started.ID)
	for name, c := range map[string]struct {
		patch map[string]any
		field string
	}{
		"turning the room off": {map[string]any{"waiting_room": false}, "waiting_room"},
		"moving its opening":   {map[string]any{"queue_opens_at": now.Add(-time.Hour)}, "queue_opens_at"},
		"moving its start":     {map[string]any{"starts_at": now.Add(time.Hour)}, "starts_at"},
	} {
		if r := call(t, st.h, "PATCH", spath, c.patch, admin()); r.Status != 400 || !strings.Contains(r.Raw, `"field":"`+c.field+`"`) {
			t.Errorf("%s after the start: %v", name, r)
		}
	}
	// A started sale without a room may still move its window.
	plain := servertest.MustSale(t, st.srv, servertest.SaleSpec{})
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", plain.ID), map[string]any{"starts_at": now.Add(-time.Hour)}, admin()); r.Status != 200 {
		t.Errorf("moving the start of a started sale without a room: %v", r)
	}
	if r := call(t, st.h, "PATCH", spath, map[string]any{"admit_per_second": 500}, admin()); r.Status != 200 || num(r.Body, "admit_per_second") != 500 {
		t.Errorf("changing the rate after the start: %v", r)
	}
}

type queueFrame struct {
	Type            string    `json:"type"`
	SaleID          int64     `json:"sale_id"`
	AdmittedThrough int64     `json:"admitted_through"`
	QueueSize       int64     `json:"queue_size"`
	Status          string    `json:"status"`
	At              time.Time `json:"at"`
}

// TestQueueFrames: the sale's WebSocket sends the room's admission as it
// advances, at most ten frames a second, and "sold_out" the moment the
// stock is gone.
func TestQueueFrames(t *testing.T) {
	st := newStack(t)
	ts := servertest.HTTP(t, st.h)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 1, Start: time.Now().Add(300 * time.Millisecond),
		WaitingRoom: true, AdmitPerSecond: 40})
	toks := make([]string, 60)
	for i := range toks {
		toks[i] = servertest.Token(t, fmt.Sprintf("crowd-%d-%s", i, servertest.Unique()))
		if r := call(t, st.h, "POST", queuePath(sale.ID), nil, bearer(toks[i])); r.Status != 200 {
			t.Fatal(r)
		}
	}
	c, _, err := servertest.DialWS(t, ts.URL, sale.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var frames []queueFrame
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(frames) == 0 || frames[len(frames)-1].AdmittedThrough < 40 {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d queue frames: %v", len(frames), err)
		}
		var f queueFrame
		if json.Unmarshal(data, &f) != nil || f.Type != "queue" {
			continue
		}
		if f.SaleID != sale.ID || f.QueueSize != 60 || len(frames) > 0 && f.AdmittedThrough < frames[len(frames)-1].AdmittedThrough {
			t.Fatalf("queue frame %+v after %+v", f, frames)
		}
		frames = append(frames, f)
	}
	span := frames[len(frames)-1].At.Sub(frames[0].At)
	if limit := int(span/(100*time.Millisecond)) + 2; len(frames) > limit {
		t.Errorf("%d queue frames in %v, more than ten a second", len(frames), span)
	}
	t.Logf("%d queue frames over %v", len(frames), span)

	var pass string
	servertest.WaitFor(t, 5*time.Second, "the first shopper's pass", func() (bool, string) {
		for _, tok := range toks {
			r := call(t, st.h, "GET", queuePath(sale.ID), nil, bearer(tok))
			if p, _ := r.Body["pass"].(string); p != "" && num(r.Body, "place") == 1 {
				pass = p
				if b := call(t, st.h, "POST", buyPath(sale.ID), passBuy("first-in-01", pass), bearer(tok)); b.Status != 200 {
					t.Fatalf("the first shopper's buy: %v", b)
				}
				return true, ""
			}
		}
		return false, "nobody at place 1 admitted"
	})
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for the sold-out frame: %v", err)
		}
		var f queueFrame
		if json.Unmarshal(data, &f) == nil && f.Type == "queue" && f.Status == "sold_out" {
			break
		}
	}
}

// TestWaitingRoomPauseLetsInNobody: a pause that nobody watches (no page,
// no socket reads the room while it lasts) lets nobody in when it ends:
// the admin's pause and resume step the room first.
func TestWaitingRoomPauseLetsInNobody(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{WaitingRoom: true, AdmitPerSecond: 100})
	ctx := context.Background()
	for i := range 1000 {
		if _, err := st.Inventory.JoinQueue(ctx, sale.ID, fmt.Sprintf("p-%04d", i), time.Now(), false); err != nil {
			t.Fatal(err)
		}
	}
	through := func() int64 {
		q, err := st.Inventory.ReadQueue(ctx, sale.ID, "", time.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		return q.AdmittedThrough
	}
	path := fmt.Sprintf("/admin/api/sales/%d/", sale.ID)
	if r := call(t, st.h, "POST", path+"pause", nil, admin()); r.Status != 200 {
		t.Fatal(r)
	}
	before, paused := through(), time.Now()
	servertest.WaitFor(t, 5*time.Second, "2 s of pause", func() (bool, string) { return time.Since(paused) > 2*time.Second, "" })
	// The sale is active again from some moment inside the resume call, so
	// the bound counts from the call's start: on a busy machine the call
	// itself can take a few hundred ms, which a pause nobody watched (2 s,
	// 200 places) would still exceed.
	resuming := time.Now()
	if r := call(t, st.h, "POST", path+"resume", nil, admin()); r.Status != 200 {
		t.Fatal(r)
	}
	after := through()
	// What 100 a second lets in from the resume to the read, and a little.
	if limit := int64(100*time.Since(resuming).Seconds()) + 5; after-before > limit {
		t.Errorf("a 2 s pause nobody watched let in %d when it ended (at most %d)", after-before, limit)
	}
}
