package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/system/servertest"
)

// child is a `seckill all --embedded` process.
type child struct {
	cmd  *exec.Cmd
	base string
	out  *servertest.Output
}

// startEmbedded starts `seckill all --embedded` on dir and waits until it
// serves, returning how long that took.
func startEmbedded(t *testing.T, dir string) (*child, time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &child{base: "http://" + addr, out: &servertest.Output{}}
	c.cmd = exec.Command(servertest.Binary(t), "all", "--embedded")
	c.cmd.Env = append(os.Environ(), "SECKILL_DATA_DIR="+dir, "SECKILL_HTTP_ADDR="+addr, "SECKILL_OPS_ADDR=",
		"SECKILL_JWT_SECRET="+servertest.JWTSecret, "SECKILL_ADMIN_TOKEN="+servertest.AdminToken,
		// Nothing external: these point at closed ports, and must not matter.
		"SECKILL_REDIS_ADDR=127.0.0.1:1", "SECKILL_AMQP_URL=amqp://guest:guest@127.0.0.1:2/",
		"SECKILL_MYSQL_DSN=root@tcp(127.0.0.1:3)/none?parseTime=true")
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(t) })
	servertest.WaitFor(t, 20*time.Second, "seckill all --embedded to serve", func() (bool, string) {
		res, err := http.Get(c.base + "/readyz")
		if err != nil {
			return false, err.Error() + "\n" + c.out.String()
		}
		res.Body.Close()
		return res.StatusCode == 200, res.Status
	})
	return c, time.Since(start)
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t *testing.T) {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("seckill all --embedded exited with %v\n%s", err, c.out.String())
	}
}

// do sends a JSON request and decodes the answer.
func (c *child) do(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// adminSession logs in with the password and returns the session cookie.
func adminSession(t *testing.T, c *child, password string) *http.Cookie {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"password": password})
	req, _ := http.NewRequest("POST", c.base+"/admin/api/login", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "sk_admin" && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("admin login: %s, no session cookie", res.Status)
	return nil
}

// withCookie sends a request with an admin session cookie and returns
// the status.
func (c *child) withCookie(t *testing.T, method, path string, ck *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest(method, c.base+path, nil)
	req.Header.Set("Origin", c.base)
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestEmbeddedSurvivesRestart: `seckill all --embedded`, with every
// external address pointing at a closed port, sells, takes a payment and
// writes its orders to the SQLite ledger; stopped and started again, it
// shows the same orders, stock, per-user counts and request ids, the
// admin session still open, the one ended still ended and the shopper
// signed out still signed out.
func TestEmbeddedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c, took := startEmbedded(t, dir)
	t.Logf("start-up to ready: %s", took)
	now := time.Now().UTC()
	status, sale := c.do(t, "POST", "/admin/api/sales", servertest.AdminToken, map[string]any{
		"name": "Embedded sale", "item": "Thing", "price_cents": 250, "total": 10, "per_user_limit": 2,
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)})
	if status != 201 {
		t.Fatalf("create sale: %d %v", status, sale)
	}
	id := int64(sale["id"].(float64))
	buy := func(user string, qty int, rid string) (int, map[string]any) {
		return c.do(t, "POST", fmt.Sprintf("/api/sales/%d/buy", id), servertest.Token(t, user), map[string]any{"qty": qty, "request_id": rid})
	}
	orders := map[string]string{} // order id → user
	for i, u := range []string{"ann", "ann", "bob", "cat"} {
		status, ans := buy(u, 1, fmt.Sprintf("embedded-%d", i))
		if status != 200 {
			t.Fatalf("buy %d: %d %v", i, status, ans)
		}
		orders[ans["order_id"].(string)] = u
	}
	if status, ans := buy("ann", 1, "embedded-over"); status != 409 || !strings.Contains(fmt.Sprint(ans), "limit_exceeded") {
		t.Fatalf("ann over her limit: %d %v", status, ans)
	}
	var paid string
	for oid, u := range orders {
		if u == "bob" {
			paid = oid
			if status, ans := c.do(t, "POST", "/admin/api/wallets/"+u+"/credit", servertest.AdminToken,
				map[string]any{"amount_cents": 250, "reason": "to pay", "request_id": "embedded-credit"}); status != 201 {
				t.Fatalf("credit: %d %v", status, ans)
			}
			if status, ans := c.do(t, "POST", "/api/orders/"+oid+"/pay", servertest.Token(t, u), nil); status != 200 || ans["status"] != "paid" {
				t.Fatalf("pay: %d %v", status, ans)
			}
		}
	}
	for oid, u := range orders {
		servertest.WaitFor(t, 10*time.Second, "the order in the ledger", func() (bool, string) {
			_, o := c.do(t, "GET", "/api/orders/"+oid, servertest.Token(t, u), nil)
			return o["persisted"] == true, fmt.Sprint(o)
		})
	}

	// No admin password was configured: the one made up is kept with the
	// data, and it is still the password after the restart.
	kept, err := os.ReadFile(filepath.Join(dir, "admin-password"))
	password := strings.TrimSpace(string(kept))
	if err != nil || password == "" || !strings.Contains(c.out.String(), "admin password: "+password) {
		t.Fatalf("the made-up admin password is not kept in the data directory (%v):\n%s", err, c.out.String())
	}
	// An admin session open, another one ended, and a shopper signed out:
	// the same after the restart.
	open, ended := adminSession(t, c, password), adminSession(t, c, password)
	if status := c.withCookie(t, "POST", "/admin/api/logout", ended); status != 204 && status != 200 {
		t.Fatalf("log out: %d", status)
	}
	eve := servertest.Token(t, "eve")
	if status, _ := c.do(t, "DELETE", "/api/session", eve, nil); status != 204 && status != 200 {
		t.Fatalf("eve signs out: %d", status)
	}
	sessionsHold := func(when string) {
		t.Helper()
		if status := c.withCookie(t, "GET", "/admin/api/sales", open); status != 200 {
			t.Errorf("%s: the open admin session answers %d", when, status)
		}
		if status := c.withCookie(t, "GET", "/admin/api/sales", ended); status != 401 {
			t.Errorf("%s: the ended admin session answers %d", when, status)
		}
		if status, _ := c.do(t, "GET", "/api/wallet", eve, nil); status != 401 {
			t.Errorf("%s: eve's token from before her sign-out answers %d", when, status)
		}
	}
	sessionsHold("before the restart")
	c.stop(t)
	c, took = startEmbedded(t, dir)
	t.Logf("restart to ready: %s", took)
	sessionsHold("after the restart")
	if status, ans := c.do(t, "POST", "/admin/api/login", "", map[string]any{"password": password}); status != 200 {
		t.Errorf("login with the kept password after the restart: %d %v", status, ans)
	}
	_, got := c.do(t, "GET", fmt.Sprintf("/api/sales/%d", id), "", nil)
	if got["remaining"] != float64(6) || got["sold"] != float64(4) {
		t.Errorf("sale after the restart: %v, want 6 remaining, 4 sold", got)
	}
	for oid, u := range orders {
		_, o := c.do(t, "GET", "/api/orders/"+oid, servertest.Token(t, u), nil)
		want := "pending"
		if oid == paid {
			want = "paid"
		}
		if o["persisted"] != true || o["status"] != want || o["amount_cents"] != float64(250) {
			t.Errorf("order %s after the restart: %v, want %s", oid, o, want)
		}
	}
	// The caps and the request ids came back with the stock.
	if status, ans := buy("ann", 1, "embedded-after"); status != 409 {
		t.Errorf("ann over her limit after the restart: %d %v", status, ans)
	}
	if status, ans := buy("ann", 1, "embedded-0"); status != 200 || orders[fmt.Sprint(ans["order_id"])] != "ann" {
		t.Errorf("ann's first request retried after the restart: %d %v", status, ans)
	}
	if status, _ := buy("dan", 2, "embedded-new"); status != 200 {
		t.Errorf("a new buy after the restart: %d", status)
	}
}
