package server_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/signed"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/tickets"
)

func ticketPath(sale int64) string    { return fmt.Sprintf("/api/sales/%d/ticket", sale) }
func challengePath(sale int64) string { return fmt.Sprintf("/api/sales/%d/challenge", sale) }

func ticketBuy(rid, ticket string) map[string]any {
	return map[string]any{"qty": 1, "request_id": rid, "ticket": ticket}
}

// available reads the units left in a sale from Redis.
func available(t *testing.T, st *stack, sale int64) int64 {
	t.Helper()
	stock, err := st.Inventory.Stock(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return stock.Available
}

// getTicket asks for a ticket with body and expects one.
func getTicket(t *testing.T, st *stack, sale int64, tok string, body any) string {
	t.Helper()
	r := call(t, st.h, "POST", ticketPath(sale), body, bearer(tok))
	tk, _ := r.Body["ticket"].(string)
	if r.Status != 200 || tk == "" || r.Body["expires_at"] == nil {
		t.Fatalf("ticket for sale %d: %v", sale, r)
	}
	return tk
}

// solve finds a nonce for a challenge, as the shopper page's worker does.
func solve(t *testing.T, ch string, difficulty int) string {
	t.Helper()
	for n := 0; n < 1<<26; n++ {
		if nonce := strconv.Itoa(n); tickets.Solves(ch, nonce, difficulty) {
			return nonce
		}
	}
	t.Fatalf("no nonce for %s at difficulty %d", ch, difficulty)
	return ""
}

// TestTicketRules: a sale with require_ticket takes buys only with a good
// ticket of the buyer for that sale; every bad one is refused with its code
// and changes nothing; tickets come only once the sale is open; a ticket
// serves several buys; other sales ignore the field.
func TestTicketRules(t *testing.T) {
	st := newStack(t)
	now := time.Now()
	guarded := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 5, RequireTicket: true})
	other := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 5, RequireTicket: true})
	open := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 5})
	later := servertest.MustSale(t, st.srv, servertest.SaleSpec{RequireTicket: true, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)})
	aliceID := "alice-" + servertest.Unique()
	alice, bob := servertest.Token(t, aliceID), servertest.Token(t, "bob-"+servertest.Unique())

	tk := getTicket(t, st, guarded.ID, alice, map[string]any{})
	otherTk := getTicket(t, st, other.ID, alice, map[string]any{})
	bobTk := getTicket(t, st, guarded.ID, bob, map[string]any{})
	key := tickets.Tickets.Key(servertest.JWTSecret)
	expired := signed.Mint(key, aliceID, guarded.ID, now.Add(-time.Second))
	forged := signed.Mint([]byte("another key"), aliceID, guarded.ID, now.Add(time.Minute))
	tampered := tk[:len(tk)-2] + "AA"
	if tampered == tk {
		tampered = tk[:len(tk)-2] + "BB"
	}

	refusals := []struct {
		name, tok string
		body      any
		code      string
	}{
		{"no ticket", alice, buyBody(1, "no-ticket-1"), "ticket_required"},
		{"empty ticket", alice, ticketBuy("empty-ticket-1", ""), "ticket_required"},
		{"garbage", alice, ticketBuy("garbage-tk-1", "not-a-ticket"), "ticket_invalid"},
		{"tampered signature", alice, ticketBuy("tampered-tk-1", tampered), "ticket_invalid"},
		{"signed with another key", alice, ticketBuy("forged-tk-1", forged), "ticket_invalid"},
		{"expired", alice, ticketBuy("expired-tk-1", expired), "ticket_invalid"},
		{"another sale's", alice, ticketBuy("other-sale-1", otherTk), "ticket_invalid"},
		{"another user's", alice, ticketBuy("bobs-ticket-1", bobTk), "ticket_invalid"},
		{"replayed by another user", bob, ticketBuy("alices-tk-1", tk), "ticket_invalid"},
		{"longer expiry, same signature", alice, ticketBuy("longer-exp-1", "9"+tk), "ticket_invalid"},
	}
	for _, rc := range refusals {
		r := call(t, st.h, "POST", buyPath(guarded.ID), rc.body, bearer(rc.tok))
		if r.Status != 403 || r.code() != rc.code {
			t.Errorf("%s: %v, want 403 %s", rc.name, r, rc.code)
		}
	}
	if got := available(t, st, guarded.ID); got != 100 {
		t.Fatalf("refused buys changed the stock: %d left, want 100", got)
	}

	// A ticket serves several buys; the same request id stays idempotent.
	var first string
	for i, rid := range []string{"good-tk-1", "good-tk-2", "good-tk-1"} {
		r := call(t, st.h, "POST", buyPath(guarded.ID), ticketBuy(rid, tk), bearer(alice))
		if r.Status != 200 {
			t.Fatalf("buy %d with a good ticket: %v", i, r)
		}
		if i == 0 {
			first, _ = r.Body["order_id"].(string)
		}
		if i == 2 && r.Body["order_id"] != first {
			t.Fatalf("retried request got order %v, want %s", r.Body["order_id"], first)
		}
	}
	if got := available(t, st, guarded.ID); got != 98 {
		t.Fatalf("%d left after two buys, want 98", got)
	}

	// A sale without require_ticket ignores the field, whatever it holds.
	if r := call(t, st.h, "POST", buyPath(open.ID), ticketBuy("ignored-tk-1", "not-a-ticket"), bearer(alice)); r.Status != 200 {
		t.Fatalf("buy on a sale without tickets: %v", r)
	}
	// Before the opening there are no tickets (and no buys).
	if r := call(t, st.h, "POST", ticketPath(later.ID), map[string]any{}, bearer(alice)); r.Status != 409 || r.code() != "not_started" {
		t.Fatalf("ticket before the opening: %v, want 409 not_started", r)
	}
	// The sale is checked before the body is read.
	if r := call(t, st.h, "POST", ticketPath(later.ID), `{"nonce":`, bearer(alice)); r.Status != 409 || r.code() != "not_started" {
		t.Fatalf("ticket before the opening with a broken body: %v, want 409 not_started", r)
	}
	for _, rc := range []struct {
		name, path string
		headers    []string
		status     int
		code       string
	}{
		{"ticket without a session", ticketPath(guarded.ID), nil, 401, "unauthenticated"},
		{"ticket for an unknown sale", ticketPath(999_999_999), []string{bearer(alice)}, 404, "sale_not_found"},
		{"challenge on a sale without proof of work", challengePath(guarded.ID), []string{bearer(alice)}, 404, "not_found"},
	} {
		method := "POST"
		if rc.path == challengePath(guarded.ID) {
			method = "GET"
		}
		body := any(map[string]any{})
		if method == "GET" {
			body = nil
		}
		if r := call(t, st.h, method, rc.path, body, rc.headers...); r.Status != rc.status || r.code() != rc.code {
			t.Errorf("%s: %v, want %d %s", rc.name, r, rc.status, rc.code)
		}
	}
	// Hostile ticket bodies.
	for _, body := range []string{`{"Challenge":"x","nonce":"1"}`, `{"challenge":1}`, `[]`, `{"nonce":"1","nonce":"2"}`} {
		if r := call(t, st.h, "POST", ticketPath(guarded.ID), body, bearer(alice)); r.Status != 400 || r.code() != "invalid_request" {
			t.Errorf("ticket body %s: %v, want 400 invalid_request", body, r)
		}
	}
	if r := call(t, st.h, "POST", buyPath(guarded.ID), ticketBuy("long-ticket-1", string(make([]byte, 200))), bearer(alice)); r.Status != 400 {
		t.Errorf("overlong ticket: %v, want 400", r)
	}

	// The merchant's dashboard counts the refusals and the tickets.
	servertest.FlushOutcomes(t, st.srv)
	r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", guarded.ID), nil, admin())
	d, _ := r.Body["defence"].(map[string]any)
	if num(d, "ticket_required") != 2 || num(d, "ticket_invalid") != 8 || num(d, "tickets_issued") != 2 {
		t.Fatalf("stats defence = %v, want 2 ticket_required, 8 ticket_invalid, 2 tickets_issued", d)
	}
}

// TestProofOfWork: on a sale with a pow_difficulty, a ticket needs a solved
// challenge of the asking user, once; wrong, foreign, reused and missing
// solutions are refused pow_invalid and hand out nothing.
func TestProofOfWork(t *testing.T) {
	st := newStack(t)
	const difficulty = 10
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 5, RequireTicket: true, PowDifficulty: difficulty})
	alice, bob := servertest.Token(t, "alice-"+servertest.Unique()), servertest.Token(t, "bob-"+servertest.Unique())

	challenge := func(tok string) string {
		t.Helper()
		r := call(t, st.h, "GET", challengePath(sale.ID), nil, bearer(tok))
		ch, _ := r.Body["challenge"].(string)
		if r.Status != 200 || len(ch) != 32 || num(r.Body, "difficulty") != difficulty || r.Body["expires_at"] == nil {
			t.Fatalf("challenge: %v", r)
		}
		return ch
	}
	ticket := func(tok string, body any) response {
		t.Helper()
		return call(t, st.h, "POST", ticketPath(sale.ID), body, bearer(tok))
	}
	wantPowInvalid := func(what string, r response) {
		t.Helper()
		if r.Status != 403 || r.code() != "pow_invalid" || r.Body["ticket"] != nil {
			t.Errorf("%s: %v, want 403 pow_invalid", what, r)
		}
	}

	// A wrong nonce (one that does not solve it) uses the challenge up.
	ch := challenge(alice)
	wrong := 0
	for tickets.Solves(ch, strconv.Itoa(wrong), difficulty) {
		wrong++
	}
	wantPowInvalid("wrong nonce", ticket(alice, map[string]any{"challenge": ch, "nonce": strconv.Itoa(wrong)}))
	wantPowInvalid("right nonce after a wrong one", ticket(alice, map[string]any{"challenge": ch, "nonce": solve(t, ch, difficulty)}))

	// A nonce for another challenge.
	a, b := challenge(alice), challenge(alice)
	wantPowInvalid("nonce of another challenge", ticket(alice, map[string]any{"challenge": b, "nonce": solve(t, a, difficulty)}))
	// Another user's challenge, solved.
	bobs := challenge(bob)
	wantPowInvalid("another user's challenge", ticket(alice, map[string]any{"challenge": bobs, "nonce": solve(t, bobs, difficulty)}))
	// Missing, malformed, never issued.
	wantPowInvalid("no solution", ticket(alice, map[string]any{}))
	wantPowInvalid("no nonce", ticket(alice, map[string]any{"challenge": a}))
	wantPowInvalid("nonce with a space", ticket(alice, map[string]any{"challenge": a, "nonce": "1 2"}))
	wantPowInvalid("never issued", ticket(alice, map[string]any{"challenge": "00000000000000000000000000000000", "nonce": "1"}))

	// A new challenge replaces the user's last one.
	a = challenge(alice)
	challenge(alice)
	wantPowInvalid("replaced challenge, solved", ticket(alice, map[string]any{"challenge": a, "nonce": solve(t, a, difficulty)}))

	// Solved: a ticket, once; the challenge is then used up.
	a = challenge(alice)
	good := map[string]any{"challenge": a, "nonce": solve(t, a, difficulty)}
	tk := getTicket(t, st, sale.ID, alice, good)
	wantPowInvalid("reused challenge", ticket(alice, good))
	if r := call(t, st.h, "POST", buyPath(sale.ID), ticketBuy("pow-buy-1", tk), bearer(alice)); r.Status != 200 {
		t.Fatalf("buy with a ticket earned by proof of work: %v", r)
	}

	// The dashboard: challenges issued vs solved.
	servertest.FlushOutcomes(t, st.srv)
	r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", sale.ID), nil, admin())
	d, _ := r.Body["defence"].(map[string]any)
	if num(d, "challenges_issued") != 7 || num(d, "challenges_solved") != 1 || num(d, "pow_invalid") != 10 {
		t.Fatalf("stats defence = %v, want 7 challenges issued, 1 solved, 10 pow_invalid", d)
	}

	// Difficulty 0 turns the proof of work off: no challenges, {} gets a ticket.
	r = call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale.ID), map[string]any{"pow_difficulty": 0}, admin())
	if r.Status != 200 || num(r.Body, "pow_difficulty") != 0 || r.Body["require_ticket"] != true {
		t.Fatalf("PATCH pow_difficulty 0: %v", r)
	}
	if r := call(t, st.h, "GET", challengePath(sale.ID), nil, bearer(alice)); r.Status != 404 {
		t.Fatalf("challenge at difficulty 0: %v, want 404", r)
	}
	getTicket(t, st, sale.ID, alice, map[string]any{})
	for _, v := range []any{-1, 33, "8", 1.5} {
		if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale.ID), map[string]any{"pow_difficulty": v}, admin()); r.Status != 400 {
			t.Errorf("PATCH pow_difficulty %v: %v, want 400", v, r)
		}
	}
}

// TestFirstCappedUsers: the users first refused for their cap are listed,
// earliest first, on the dashboard.
func TestFirstCappedUsers(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 1})
	users := []string{"first-" + servertest.Unique(), "second-" + servertest.Unique()}
	for _, u := range users {
		tok := servertest.Token(t, u)
		for i := range 3 {
			call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("capped-%s-%d", u, i)), bearer(tok))
		}
	}
	servertest.FlushOutcomes(t, st.srv)
	r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", sale.ID), nil, admin())
	d, _ := r.Body["defence"].(map[string]any)
	list, _ := d["first_capped"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["user_id"] != users[0] || list[1].(map[string]any)["user_id"] != users[1] {
		t.Fatalf("first_capped = %v, want %v in that order", list, users)
	}
}
