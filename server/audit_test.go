package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/system/servertest"
)

// auditRows reads the audit log through the API.
func auditRows(t *testing.T, st *stack, query string) []map[string]any {
	t.Helper()
	r := call(t, st.h, "GET", "/admin/api/audit"+query, nil, admin())
	if r.Status != 200 {
		t.Fatalf("audit: %v", r)
	}
	var out []map[string]any
	for _, e := range r.Body["entries"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestEveryAdminChangeIsAudited: each state-changing admin route writes
// exactly one row, with the fields it changed before and after; a refused
// change writes none; logins and failed logins are rows too.
func TestEveryAdminChangeIsAudited(t *testing.T) {
	st := newStack(t)
	now := time.Now().UTC()
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Audit", "item": "Thing", "price_cents": 4999,
		"total": 10, "per_user_limit": 1, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}, admin())
	if r.Status != 201 {
		t.Fatal(r)
	}
	id := num(r.Body, "id")
	sale := fmt.Sprintf("/admin/api/sales/%d", id)
	steps := []struct {
		method, path string
		body         any
		action       string
		before       string // the changed fields before, as JSON ("" for none)
		after        string
	}{
		{"PATCH", sale, map[string]any{"price_cents": 49}, "sale.patch", `{"price_cents":4999}`, `{"price_cents":49}`},
		{"POST", sale + "/restock", map[string]any{"qty": 5}, "sale.restock", `{"total":10}`, `{"total":15}`},
		{"POST", sale + "/pause", nil, "sale.pause", `{"status":"active"}`, `{"status":"paused"}`},
		{"POST", sale + "/resume", nil, "sale.resume", `{"status":"paused"}`, `{"status":"active"}`},
		{"POST", sale + "/end", nil, "sale.end", `{"status":"active"}`, `{"status":"ended"}`},
	}
	for _, s := range steps {
		if r := call(t, st.h, s.method, s.path, s.body, admin()); r.Status != 200 {
			t.Fatalf("%s %s: %v", s.method, s.path, r)
		}
		rows := auditRows(t, st, fmt.Sprintf("?sale_id=%d&limit=1", id))
		got := rows[0]
		b, _ := json.Marshal(got["before"])
		a, _ := json.Marshal(got["after"])
		if got["action"] != s.action || string(b) != s.before || string(a) != s.after || got["actor"] != "operator" ||
			got["role"] != "operator" || got["ip"] != "192.0.2.1" {
			t.Errorf("%s: audit row %v", s.action, got)
		}
	}
	// Refused changes write no row.
	for _, s := range []struct {
		method, path string
		body         any
	}{
		{"PATCH", sale, map[string]any{"price_cents": -1}},
		{"POST", sale + "/resume", nil}, // ended
		{"POST", sale + "/restock", map[string]any{"qty": 0}},
		{"PATCH", sale, `{"Name":"x"}`},
	} {
		if r := call(t, st.h, s.method, s.path, s.body, admin()); r.Status < 400 {
			t.Fatalf("%s %s accepted: %v", s.method, s.path, r)
		}
	}
	rows := auditRows(t, st, fmt.Sprintf("?sale_id=%d", id))
	if len(rows) != 1+len(steps) {
		t.Errorf("%d rows for the sale, want %d (create and each change, no refusal)", len(rows), 1+len(steps))
	}
	if last := rows[len(rows)-1]; last["action"] != "sale.create" || !strings.Contains(fmt.Sprint(last["after"]), "Audit") {
		t.Errorf("the create row: %v", last)
	}
	// Logins: a wrong password and a right one.
	call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": "wrong"})
	call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": servertest.AdminPassword})
	all := auditRows(t, st, "?limit=2")
	if len(all) != 2 || all[0]["action"] != "login" || all[1]["action"] != "login.failed" {
		t.Errorf("login rows: %v", all)
	}
	// Paging: before_id continues where a page ended.
	page := call(t, st.h, "GET", "/admin/api/audit?limit=3", nil, admin())
	next := num(page.Body, "next_before_id")
	rest := auditRows(t, st, fmt.Sprintf("?before_id=%d&limit=500", next))
	if len(rest) != 1+len(steps)+2-3 {
		t.Errorf("second page: %d rows", len(rest))
	}
	if r := call(t, st.h, "GET", "/admin/api/audit?limit=0", nil, admin()); r.Status != 400 {
		t.Errorf("limit 0: %v", r)
	}
	// Filters: by action, and by time (since inclusive, until exclusive).
	paused := auditRows(t, st, fmt.Sprintf("?sale_id=%d&action=sale.pause", id))
	if len(paused) != 1 || paused[0]["action"] != "sale.pause" {
		t.Errorf("action filter: %v", paused)
	}
	at, err := time.Parse(time.RFC3339Nano, paused[0]["at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	q := func(since, until time.Time) string {
		return fmt.Sprintf("?sale_id=%d&since=%s&until=%s", id, since.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	}
	if rows := auditRows(t, st, q(at, at.Add(time.Millisecond))); len(rows) == 0 || rows[len(rows)-1]["id"] != paused[0]["id"] {
		t.Errorf("since the pause's time, until a millisecond later: %v", rows)
	}
	if rows := auditRows(t, st, q(at.Add(-time.Hour), at)); len(rows) == 0 || slices.ContainsFunc(rows, func(r map[string]any) bool {
		return r["id"] == paused[0]["id"]
	}) {
		t.Errorf("until the pause's time holds it: %v", rows)
	}
	for _, bad := range []string{"action=sale.patch%27--", "action=Sale.Patch", "action=" + strings.Repeat("a", 33), "since=yesterday",
		"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z"} {
		if r := call(t, st.h, "GET", "/admin/api/audit?"+bad, nil, admin()); r.Status != 400 || r.Body["error"] == nil {
			t.Errorf("%s: %v", bad, r)
		}
	}
	csv := call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?format=csv&sale_id=%d", id), nil, admin())
	if csv.Status != 200 || !strings.HasPrefix(csv.Raw, "id,at,actor,role,action,sale_id,before,after,ip\n") ||
		strings.Count(csv.Raw, "\n") != 2+len(steps) {
		t.Errorf("CSV: %v", csv)
	}
	if r := call(t, st.h, "GET", "/admin/api/audit", nil); r.Status != 401 {
		t.Errorf("audit without the admin: %v", r)
	}
}

// TestConcurrentPatchesAuditedInCommitOrder: patches of one sale at once
// each get their row, in the order they committed (each row's before is
// the previous row's after).
func TestConcurrentPatchesAuditedInCommitOrder(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, PriceCents: 100})
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale.ID), map[string]any{"price_cents": 1000 + i}, admin())
		})
	}
	wg.Wait()
	rows := auditRows(t, st, fmt.Sprintf("?sale_id=%d&limit=500", sale.ID))
	if len(rows) != n+1 {
		t.Fatalf("%d rows, want %d", len(rows), n+1)
	}
	for i := len(rows) - 2; i > 0; i-- { // oldest patch first
		older, newer := rows[i], rows[i-1]
		was, _ := newer["before"].(map[string]any)
		is, _ := older["after"].(map[string]any)
		if was["price_cents"] != is["price_cents"] {
			t.Errorf("row %v's before is not row %v's after", newer["id"], older["id"])
		}
	}
}

// TestMerchantAuditView: a merchant reads the rows of its own sales and
// account, and the addresses of its own actions only, in the JSON view and
// the CSV export alike (the export once showed the operator's address);
// the failed sign-ins that named its email are its rows too, with the
// guesser's address, as a security log shows them; the operator reads
// every row with every address.
func TestMerchantAuditView(t *testing.T) {
	st := newStack(t)
	_, a := merchantLogin(t, st, "view@shop.example")
	sale := saleOf(t, st, []string{a})
	const operatorIP, guesserIP = "198.51.100.7", "203.0.113.9"
	if r := call(t, ipHandler{st.h, operatorIP}, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale), map[string]any{"price_cents": 7}, admin()); r.Status != 200 {
		t.Fatal(r)
	}
	if s := loginFrom(st, guesserIP, `{"email":"VIEW@shop.example","password":"not the password"}`); s != 401 {
		t.Fatalf("a wrong password: %d", s)
	}
	if s := loginFrom(st, guesserIP, `{"email":"nobody@shop.example","password":"not the password"}`); s != 401 {
		t.Fatalf("an unknown email: %d", s)
	}

	// The sale's rows: JSON and CSV show the same addresses.
	r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?sale_id=%d", sale), nil, a)
	if r.Status != 200 {
		t.Fatal(r)
	}
	entries := r.Body["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("the sale's rows: %v", r)
	}
	ips := map[string]string{}
	for _, e := range entries {
		row := e.(map[string]any)
		ips[row["action"].(string)] = row["ip"].(string)
	}
	if ips["sale.patch"] != "" || ips["sale.create"] != "192.0.2.1" {
		t.Errorf("JSON addresses: %v, want the operator's blank and the merchant's own", ips)
	}
	csv := call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?sale_id=%d&format=csv", sale), nil, a)
	if csv.Status != 200 || strings.Contains(csv.Raw, operatorIP) || !strings.Contains(csv.Raw, "192.0.2.1") {
		t.Errorf("CSV shows another actor's address, or not its own:\n%s", csv.Raw)
	}

	// Its account's rows: its sign-in, and the failed one that named it.
	r = call(t, st.h, "GET", "/admin/api/audit?actor=view@shop.example", nil, a)
	var failed []map[string]any
	for _, e := range r.Body["entries"].([]any) {
		if row := e.(map[string]any); row["action"] == "login.failed" {
			failed = append(failed, row)
		}
	}
	if len(failed) != 1 || failed[0]["ip"] != guesserIP {
		t.Errorf("the merchant's failed sign-ins: %v, want one from %s", failed, guesserIP)
	}
	for _, e := range call(t, st.h, "GET", "/admin/api/audit?limit=500", nil, a).Body["entries"].([]any) {
		if row := e.(map[string]any); row["actor"] == "nobody@shop.example" {
			t.Errorf("a merchant reads another email's failed sign-in: %v", row)
		}
	}

	// The operator reads every address.
	all := auditRows(t, st, fmt.Sprintf("?sale_id=%d", sale))
	if len(all) != 2 || all[0]["ip"] != operatorIP {
		t.Errorf("the operator's view: %v", all)
	}
	if rows := auditRows(t, st, "?actor=nobody@shop.example"); len(rows) != 1 || rows[0]["ip"] != guesserIP {
		t.Errorf("the operator's view of an unknown email's failed sign-in: %v", rows)
	}
}
