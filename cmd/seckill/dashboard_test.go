package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/system/servertest"
)

// freeAddr is a loopback address free a moment ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// promQuery runs an instant query and returns its result's series count.
func promQuery(base, expr string) (int, error) {
	res, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return 0, err
	}
	if out.Status != "success" {
		return 0, fmt.Errorf("%s: %s", out.Status, out.Error)
	}
	return len(out.Data.Result), nil
}

// TestDashboardAndAlertsOnRealPrometheus: a real Prometheus (Debian's)
// scrapes a `seckill all` through a short burst of buys; then every
// dashboard panel's query and every alert's expression runs against it
// through the HTTP API: each parses, the traffic panels return data, and
// Prometheus loaded every rule.
func TestDashboardAndAlertsOnRealPrometheus(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found: apt-get install prometheus (scripts/services.sh does): %v", err)
	}
	bin := servertest.Binary(t)
	env := servertest.New(t)
	servertest.Broker(t, env.Config)
	cfg := env.Config
	cfg.Buy.RateGlobal, cfg.Buy.RatePerUser, cfg.Buy.RatePerIP = 0, 0, 0
	ops := freeAddr(t)
	ctx := context.Background()
	child, err := bench.Start(ctx, bin, cfg, []string{"SECKILL_OPS_ADDR=" + ops}, "all")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(child.Stop)

	dir := t.TempDir()
	rules, err := filepath.Abs("../../configs/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	promConf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %s\nscrape_configs:\n  - job_name: seckill\n    static_configs:\n      - targets: [%q]\n", rules, ops)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promConf), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	prom.Stderr = os.Stderr
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Process.Kill(); _ = prom.Wait() })
	base := "http://" + promAddr
	servertest.WaitFor(t, 30*time.Second, "Prometheus to scrape the child", func() (bool, string) {
		n, err := promQuery(base, `up{job="seckill"} == 1`)
		return err == nil && n == 1, fmt.Sprintf("%d targets up, %v", n, err)
	})

	rep, err := loadtest.Run(ctx, loadtest.Options{URL: "http://" + child.Addr, AdminToken: cfg.Sessions.AdminToken, JWTSecret: cfg.Sessions.JWTSecret,
		CreateSale: "total=300,limit=1", Users: 400, Qty: 1, Concurrency: 16, Duration: 3 * time.Second})
	if err != nil || rep.Accepted == 0 {
		t.Fatalf("the burst: %v, %d accepted", err, rep.Accepted)
	}
	servertest.WaitFor(t, 30*time.Second, "Prometheus to see the burst and its orders", func() (bool, string) {
		n, err := promQuery(base, `sum(increase(seckill_worker_orders_persisted_total[1m])) > 0 and sum(increase(seckill_buy_outcomes_total[1m])) > 0`)
		return err == nil && n > 0, fmt.Sprintf("%d series, %v", n, err)
	})
	// Money moves too: its panels' outcomes read 0 from the start, so
	// only payments, a webhook and movements reaching the ledger show
	// that they count what happens.
	moveMoney(t, "http://"+child.Addr, cfg.Sessions.AdminToken, cfg.Sessions.JWTSecret)
	servertest.WaitFor(t, 30*time.Second, "Prometheus to see the payments, the webhook and the movements in the ledger", func() (bool, string) {
		n, err := promQuery(base, `sum(increase(seckill_payments_total{outcome="ok"}[1m])) > 0 and sum(increase(seckill_payments_total{outcome="insufficient_funds"}[1m])) > 0`+
			` and sum(increase(seckill_webhooks_total{outcome="invalid_signature"}[1m])) > 0 and sum(increase(seckill_funds_ledger_lag_seconds_count[1m])) > 0`)
		return err == nil && n > 0, fmt.Sprintf("%d series, %v", n, err)
	})

	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err := os.ReadFile("../../configs/grafana/seckill.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	// Panels that show the burst and its payments; the rest (errors,
	// RabbitMQ's own series) may be empty on a healthy run.
	traffic := map[string]bool{"Buys by outcome": true, "Buy latency p50 / p99": true, "Stock per sale": true,
		"Outbox and ledger lag": true, "Relay and worker throughput": true, "Queue depths": true,
		"Redis CPU per decision": true, "WebSocket watchers": true, "Batch size (coalescing)": true,
		"Payments by outcome": true, "Funds outbox and ledger lag": true, "Webhooks by outcome": true}
	for _, p := range dash.Panels {
		series := 0
		for _, tg := range p.Targets {
			n, err := promQuery(base, strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m"))
			if err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, tg.Expr, err)
			}
			series += n
		}
		if traffic[p.Title] && series == 0 {
			t.Errorf("panel %q shows nothing after the burst", p.Title)
		}
		delete(traffic, p.Title)
	}
	for title := range traffic {
		t.Errorf("the dashboard lost its panel %q", title)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}

	var alerts struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	ar, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(ar, &alerts); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			n++
			exprs = append(exprs, r.Expr)
			if _, err := promQuery(base, r.Expr); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
		}
	}
	checkLabels(t, base, exprs)
	res, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var loaded struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name   string `json:"name"`
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&loaded); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, g := range loaded.Data.Groups {
		got += len(g.Rules)
	}
	if got != n || n < 10 {
		t.Errorf("Prometheus loaded %d rules of %d", got, n)
	}
	t.Logf("%d panels and %d alert expressions ran on Prometheus after a burst of %d buys (%d accepted)", len(dash.Panels), n, rep.Requests, rep.Accepted)
}

// moveMoney pays on the child at base: the operator credits three
// shoppers' wallets, they and a fourth without funds each buy a unit of a
// priced sale and pay it (the fourth is refused for insufficient funds),
// and a webhook without a signature is refused.
func moveMoney(t *testing.T, base, adminToken, jwtSecret string) {
	t.Helper()
	c := &child{base: base}
	now := time.Now().UTC()
	status, sale := c.do(t, "POST", "/admin/api/sales", adminToken, map[string]any{
		"name": "Paid sale", "item": "Thing", "price_cents": 250, "total": 10, "per_user_limit": 1,
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)})
	if status != 201 {
		t.Fatalf("create a priced sale: %d %v", status, sale)
	}
	for i, user := range []string{"dash_payer_1", "dash_payer_2", "dash_payer_3", "dash_broke"} {
		token, _, err := sessions.MintToken([]byte(jwtSecret), user, user, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		funded := i < 3
		if funded {
			if status, ans := c.do(t, "POST", "/admin/api/wallets/"+user+"/credit", adminToken,
				map[string]any{"amount_cents": 250, "reason": "dashboard test", "request_id": "dash-credit-" + user}); status != 201 {
				t.Fatalf("credit %s: %d %v", user, status, ans)
			}
		}
		status, ans := c.do(t, "POST", fmt.Sprintf("/api/sales/%v/buy", sale["id"]), token, map[string]any{"qty": 1, "request_id": "dash-buy-" + user})
		if status != 200 {
			t.Fatalf("buy for %s: %d %v", user, status, ans)
		}
		status, ans = c.do(t, "POST", "/api/orders/"+ans["order_id"].(string)+"/pay", token, nil)
		if funded && (status != 200 || ans["status"] != "paid") || !funded && (status != 402 || !strings.Contains(fmt.Sprint(ans), "insufficient_funds")) {
			t.Fatalf("pay for %s (funded %v): %d %v", user, funded, status, ans)
		}
	}
	if status, ans := c.do(t, "POST", "/api/payments/webhook", "", map[string]any{"type": "checkout.session.completed"}); status != 400 || !strings.Contains(fmt.Sprint(ans), "invalid_signature") {
		t.Fatalf("an unsigned webhook: %d %v", status, ans)
	}
}

var (
	selector = regexp.MustCompile(`(seckill_[a-z_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
	grouping = regexp.MustCompile(`by \(([a-z_, ]+)\) \((?:rate\()?(seckill_[a-z_]+)`)
)

// checkLabels: every label a panel or an alert matches or groups a series
// of ours by is one the series has, where Prometheus scraped it (a query
// on a label the metric lacks parses, and shows or fires nothing).
func checkLabels(t *testing.T, base string, exprs []string) {
	t.Helper()
	uses := map[[2]string]bool{}
	for _, e := range exprs {
		for _, m := range selector.FindAllStringSubmatch(e, -1) {
			for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
				uses[[2]string{m[1], l[1]}] = true
			}
		}
		for _, m := range grouping.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1], ",") {
				uses[[2]string{m[2], strings.TrimSpace(l)}] = true
			}
		}
	}
	for u := range uses {
		metric, label := u[0], u[1]
		if label == "le" || label == "job" || label == "instance" {
			continue
		}
		if n, err := promQuery(base, "count("+metric+")"); err != nil || n == 0 {
			continue // not scraped in this run (it appears on failures only)
		}
		if n, err := promQuery(base, fmt.Sprintf(`count(%s{%s!=""})`, metric, label)); err != nil || n == 0 {
			t.Errorf("%s has no label %q, which a panel or an alert uses (%v)", metric, label, err)
		}
	}
	if len(uses) == 0 {
		t.Error("no label matchers found: the check checks nothing")
	}
}
