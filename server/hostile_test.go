package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/system/servertest"
)

// state is everything a request could change, as text: every Redis key of
// the test's prefix (buy outcome counters aside) and every ledger row.
func state(t *testing.T, st *stack) string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for _, k := range servertest.Keys(t, st.Redis, st.Config.Redis.Prefix+":*") {
		if !strings.HasSuffix(k, ":outcomes") {
			keys = append(keys, k)
		}
	}
	var b strings.Builder
	for _, k := range keys {
		switch typ := st.Redis.Type(ctx, k).Val(); typ {
		case "hash":
			fmt.Fprintf(&b, "%s %v\n", k, st.Redis.HGetAll(ctx, k).Val())
		case "stream":
			fmt.Fprintf(&b, "%s %d entries\n", k, st.Redis.XLen(ctx, k).Val())
		case "zset":
			fmt.Fprintf(&b, "%s %v\n", k, st.Redis.ZRangeWithScores(ctx, k, 0, -1).Val())
		default:
			fmt.Fprintf(&b, "%s %s\n", k, typ)
		}
	}
	for _, q := range []string{
		"SELECT CONCAT_WS('|', id, name, item, price_cents, total, per_user_limit, starts_at, ends_at, status) FROM sales ORDER BY id",
		"SELECT CONCAT_WS('|', id, user_id, qty, amount_cents, status) FROM orders ORDER BY id",
		"SELECT CONCAT_WS('|', sale_id, order_id, delta, reason) FROM stock_movements ORDER BY id",
	} {
		var rows []string
		if err := st.DB.Select(&rows, q); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v\n", rows)
	}
	return b.String()
}

// TestHostileInput sends every route with a body what an attacker would:
// mis-cased and duplicated keys, wrong types, values that overflow, control
// and text-direction characters, oversized bodies and the wrong content
// type. Each answer must be the right 4xx with the JSON error body, and
// nothing may change: not the stock, not the orders, not the ledger.
func TestHostileInput(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 2, PriceCents: 500})
	tok := servertest.Token(t, "attacker")
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "first-buy"), bearer(tok)); r.Status != 200 {
		t.Fatalf("first buy: %v", r)
	}

	buy, user := buyPath(sale.ID), bearer(tok)
	salePath := fmt.Sprintf("/admin/api/sales/%d", sale.ID)
	restock := salePath + "/restock"
	now := time.Now().UTC()
	times := fmt.Sprintf(`"starts_at":%q,"ends_at":%q`, now.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	newSale := func(fields string) string {
		return `{"name":"n","item":"i","total":10,"per_user_limit":1,` + times + `,` + fields + `}`
	}
	long := strings.Repeat("x", 201)
	type hostile struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}
	var cases []hostile
	add := func(method, path string, headers []string, status int, code string, bodies map[string]string) {
		for name, body := range bodies {
			cases = append(cases, hostile{name, method, path, body, headers, status, code})
		}
	}
	add("POST", buy, []string{user}, 400, "invalid_request", map[string]string{
		"buy: upper-case keys":         `{"QTY":1,"REQUEST_ID":"upper-case-1"}`,
		"buy: mixed-case keys":         `{"Qty":1,"Request_ID":"mixed-case-1"}`,
		"buy: mis-cased second qty":    `{"qty":1,"request_id":"second-qty-1","Qty":3}`,
		"buy: duplicated qty":          `{"qty":1,"request_id":"dup-qty-0001","qty":3}`,
		"buy: duplicated request_id":   `{"qty":1,"request_id":"dup-rid-0001","request_id":"dup-rid-0002"}`,
		"buy: qty as string":           `{"qty":"1","request_id":"qty-string-1"}`,
		"buy: qty as bool":             `{"qty":true,"request_id":"qty-bool-001"}`,
		"buy: qty as array":            `{"qty":[1],"request_id":"qty-array-01"}`,
		"buy: qty null":                `{"qty":null,"request_id":"qty-null-001"}`,
		"buy: qty beyond int64":        `{"qty":9223372036854775808,"request_id":"qty-over-001"}`,
		"buy: qty exponent":            `{"qty":1e400,"request_id":"qty-exp-0001"}`,
		"buy: request_id number":       `{"qty":1,"request_id":12345678}`,
		"buy: request_id with NUL":     `{"qty":1,"request_id":"nul\u0000byte-1"}`,
		"buy: request_id with newline": `{"qty":1,"request_id":"line\nbreak-1"}`,
		"buy: invalid UTF-8":           "{\"qty\":1,\"request_id\":\"bad-\xff-utf8\"}",
		"buy: trailing garbage":        `{"qty":1,"request_id":"trailing-01"} x`,
		"buy: unknown field":           `{"qty":1,"request_id":"unknown-f-01","user_id":"victim"}`,
		"buy: mis-cased ticket":        `{"qty":1,"request_id":"ticket-case1","Ticket":"x"}`,
		"buy: ticket number":           `{"qty":1,"request_id":"ticket-num-1","ticket":5}`,
		"buy: ticket null":             `{"qty":1,"request_id":"ticket-nul-1","ticket":null}`,
		"buy: duplicated ticket":       `{"qty":1,"request_id":"ticket-dup-1","ticket":"a","ticket":"b"}`,
	})
	cases = append(cases,
		hostile{"buy: text/plain", "POST", buy, `{"qty":1,"request_id":"text-plain-1"}`, []string{user, "Content-Type: text/plain"}, 400, "invalid_request"},
		hostile{"buy: form", "POST", buy, `qty=1&request_id=form-encoded1`, []string{user, "Content-Type: application/x-www-form-urlencoded"}, 400, "invalid_request"},
		hostile{"buy: 5 KiB", "POST", buy, `{"qty":1,"request_id":"` + strings.Repeat("y", 5<<10) + `"}`, []string{user}, 413, "body_too_large"},
		hostile{"buy: qty 2^63-1", "POST", buy, `{"qty":9223372036854775807,"request_id":"qty-max-0001"}`, []string{user}, 409, "limit_exceeded"},
	)
	add("POST", "/admin/api/sales", []string{admin()}, 400, "invalid_request", map[string]string{
		"create: mis-cased key":        newSale(`"Price_Cents":1`),
		"create: duplicated name":      newSale(`"price_cents":1,"name":"other"`),
		"create: price 2^63-1":         newSale(`"price_cents":9223372036854775807`),
		"create: price over the bound": newSale(fmt.Sprintf(`"price_cents":%d`, seckill.MaxPriceCents+1)),
		"create: negative price":       newSale(`"price_cents":-1`),
		"create: price as string":      newSale(`"price_cents":"100"`),
		"create: price null":           newSale(`"price_cents":null`),
		"create: total over the bound": `{"name":"n","item":"i","total":100000001,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: limit over total":     `{"name":"n","item":"i","total":10,"per_user_limit":11,"price_cents":1,` + times + `}`,
		"create: name with NUL":        `{"name":"a\u0000b","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: name with ESC":        `{"name":"a\u001b[31mb","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: name with CR/LF":      `{"name":"a\r\nb","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: name with RLO":        `{"name":"invoice \u202efdp.exe","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: item with isolate":    `{"name":"n","item":"a\u2066b\u2069","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: item with LRM":        `{"name":"n","item":"a\u200eb","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: name of 201":          `{"name":"` + long + `","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: name of 201 padded":   `{"name":"  ` + long + `  ","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: blank name":           `{"name":"   ","item":"i","total":10,"per_user_limit":1,"price_cents":1,` + times + `}`,
		"create: year 0":               `{"name":"n","item":"i","total":10,"per_user_limit":1,"price_cents":1,"starts_at":"0000-01-01T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`,
		"create: year 9999 end":        `{"name":"n","item":"i","total":10,"per_user_limit":1,"price_cents":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"9999-12-31T00:00:00Z"}`,
		"create: time not RFC 3339":    `{"name":"n","item":"i","total":10,"per_user_limit":1,"price_cents":1,"starts_at":"tomorrow","ends_at":"2030-01-01T00:00:00Z"}`,
	})
	cases = append(cases,
		hostile{"create: 17 KiB", "POST", "/admin/api/sales", newSale(`"price_cents":1,"x":"` + strings.Repeat("z", 17<<10) + `"`), []string{admin()}, 413, "body_too_large"},
		hostile{"create: no content type", "POST", "/admin/api/sales", newSale(`"price_cents":1`), []string{admin(), "Content-Type:"}, 400, "invalid_request"},
	)
	add("PATCH", salePath, []string{admin()}, 400, "invalid_request", map[string]string{
		"patch: mis-cased key":        `{"Name":"renamed"}`,
		"patch: duplicated price":     `{"price_cents":1,"price_cents":2}`,
		"patch: price 2^63-1":         `{"price_cents":9223372036854775807}`,
		"patch: name null":            `{"name":null}`,
		"patch: name with bidi":       `{"name":"x\u202ey"}`,
		"patch: name of 201 padded":   `{"name":" ` + long + ` "}`,
		"patch: total":                `{"total":5}`,
		"patch: limit as float":       `{"per_user_limit":1.5}`,
		"patch: window turned around": `{"ends_at":"2000-01-02T00:00:00Z"}`,
	})
	add("POST", restock, []string{admin()}, 400, "invalid_request", map[string]string{
		"restock: mis-cased qty":  `{"QTY":5}`,
		"restock: duplicated qty": `{"qty":1,"qty":5}`,
		"restock: qty 2^63-1":     `{"qty":9223372036854775807}`,
		"restock: over the total": `{"qty":100000000}`,
		"restock: zero":           `{"qty":0}`,
		"restock: qty as string":  `{"qty":"5"}`,
	})
	add("POST", "/api/session", nil, 400, "invalid_request", map[string]string{
		"session: mis-cased name":  `{"Name":"mallory"}`,
		"session: duplicated name": `{"name":"a","name":"b"}`,
		"session: name with bidi":  `{"name":"\u202eyrollam"}`,
		"session: name with NUL":   `{"name":"a\u0000"}`,
		"session: name of 65":      `{"name":"` + strings.Repeat("m", 65) + `"}`,
	})
	add("POST", "/admin/api/login", nil, 400, "invalid_request", map[string]string{
		"login: mis-cased password":   fmt.Sprintf(`{"Password":%q}`, servertest.AdminPassword),
		"login: duplicated password":  fmt.Sprintf(`{"password":"wrong","password":%q}`, servertest.AdminPassword),
		"login: password as number":   `{"password":12345}`,
		"login: password with extras": fmt.Sprintf(`{"password":%q,"admin":true}`, servertest.AdminPassword),
	})

	before := state(t, st)
	for _, tc := range cases {
		r := call(t, st.h, tc.method, tc.path, tc.body, tc.headers...)
		e, _ := r.Body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if r.Status != tc.status || r.code() != tc.code || msg == "" {
			t.Errorf("%s: %v, want %d %s with a message", tc.name, r, tc.status, tc.code)
		}
		if strings.Contains(r.Header.Get("Set-Cookie"), "sk_") && !strings.Contains(r.Header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("%s: a refused request set a cookie: %s", tc.name, r.Header.Get("Set-Cookie"))
		}
	}
	if after := state(t, st); after != before {
		t.Errorf("refused requests changed the state:\nbefore %s\nafter  %s", before, after)
	}
}

// TestNamesStoredAsValidated: a name is validated as it is stored, so
// surrounding spaces are trimmed rather than stored (a 200-character name
// padded with spaces used to pass the check and fail in MySQL with a 500);
// right-to-left scripts and emoji are names like any other.
func TestNamesStoredAsValidated(t *testing.T) {
	st := newStack(t)
	now := time.Now().UTC()
	name := strings.Repeat("é", 200)
	body := map[string]any{"name": "  " + name + "  ", "item": " سماعة 🎧 ", "price_cents": seckill.MaxPriceCents,
		"total": 3, "per_user_limit": 3, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}
	r := call(t, st.h, "POST", "/admin/api/sales", body, admin())
	if r.Status != 201 || r.Body["name"] != name || r.Body["item"] != "سماعة 🎧" {
		t.Fatalf("create with padded names: %v", r)
	}
	id := num(r.Body, "id")
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", id), map[string]any{"name": "\t" + name + "\n"}, admin()); r.Status != 200 || r.Body["name"] != name {
		t.Fatalf("patch with padded name: %v", r)
	}
	var stored string
	if err := st.DB.Get(&stored, "SELECT name FROM sales WHERE id = ?", id); err != nil || stored != name {
		t.Fatalf("stored name %q, %v", stored, err)
	}
	// The highest price times the most units a user may buy fits: the
	// amount is exact, never negative.
	tok := servertest.Token(t, "rich")
	b := call(t, st.h, "POST", buyPath(id), buyBody(3, "rich-buy-01"), bearer(tok))
	if b.Status != 200 {
		t.Fatalf("buy: %v", b)
	}
	o := call(t, st.h, "GET", "/api/orders/"+b.Body["order_id"].(string), nil, bearer(tok))
	if o.Status != 200 || int64(o.Body["amount_cents"].(float64)) != 3*seckill.MaxPriceCents {
		t.Errorf("order of 3 at the highest price: %v", o)
	}
}
