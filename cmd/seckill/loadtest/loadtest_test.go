package loadtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/identity/mailbox"
	"github.com/seckill/seckill/system/servertest"
)

// stack is the real system on loopback: server, relay and worker.
func stack(t *testing.T) string {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	return servertest.HTTP(t, srv.Handler()).URL
}

// TestHonestRunPasses: a short run in each mode against the real stack,
// with deliberate retries, passes its audit including MySQL persistence.
func TestHonestRunPasses(t *testing.T) {
	url := stack(t)
	for _, o := range []loadtest.Options{
		{Concurrency: 32, Duration: 2 * time.Second, CreateSale: "total=400,limit=2"},
		{Rate: 400, Requests: 600, CreateSale: "total=100,limit=1"},
	} {
		o.URL, o.AdminToken, o.JWTSecret = url, servertest.AdminToken, servertest.JWTSecret
		o.Users, o.Qty, o.Retries, o.WaitPersist = 150, 1, 0.1, 30*time.Second
		rep, err := loadtest.Run(context.Background(), o)
		var b strings.Builder
		rep.Print(&b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if rep.Outcomes["ok"] == 0 || rep.Accepted == 0 || rep.Requests == 0 || rep.Latency.P99 <= 0 {
			t.Errorf("an honest run with nothing to show:\n%s", b.String())
		}
		if !rep.Audit.Passed || len(rep.Audit.Checks) < 6 {
			t.Errorf("audit: %+v", rep.Audit)
		}
		var decoded loadtest.Report
		var js strings.Builder
		if err := rep.JSON(&js); err != nil || json.Unmarshal([]byte(js.String()), &decoded) != nil || decoded.Requests != rep.Requests {
			t.Errorf("JSON report: %v\n%s", err, js.String())
		}
	}
}

// TestBuyersPay: with Fund and Pay 1, every accepted order is paid by its
// buyer from the wallet Fund filled before its first payment (the demo's
// shoppers), and only buyers are funded.
func TestBuyersPay(t *testing.T) {
	env := servertest.New(t)
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	url := servertest.HTTP(t, srv.Handler()).URL
	var funded sync.Map
	rep, err := loadtest.Run(context.Background(), loadtest.Options{
		URL: url, AdminToken: servertest.AdminToken, JWTSecret: servertest.JWTSecret, CreateSale: "total=50,limit=1,price=700",
		Users: 80, Qty: 1, Concurrency: 8, Requests: 120, NoAudit: true, Pay: 1,
		Fund: func(ctx context.Context, user string) error {
			funded.Store(user, true)
			env.Fund(t, user, 1000)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The payments run beside the buys: wait for them to be answered.
	servertest.WaitFor(t, 10*time.Second, "every accepted order paid", func() (bool, string) {
		orders, err := env.Ledger.SaleOrders(context.Background(), rep.SaleID)
		paid := 0
		for _, o := range orders {
			if o.Status == "paid" {
				paid++
			}
		}
		return err == nil && rep.Accepted > 0 && int64(paid) == rep.Accepted, fmt.Sprintf("%d of %d paid (%v)", paid, rep.Accepted, err)
	})
	n := 0
	funded.Range(func(_, _ any) bool { n++; return true })
	if int64(n) != rep.Accepted { // one order each (limit 1): each buyer funded once
		t.Errorf("%d users funded, want the %d buyers", n, rep.Accepted)
	}
}

// TestTicketedSale: on a sale with buy tickets and a proof of work, a run
// gets each user a ticket first (reported apart from the buys) and buys
// with it; with --tickets=false every buy is refused ticket_required and
// nothing is sold.
func TestTicketedSale(t *testing.T) {
	url := stack(t)
	base := loadtest.Options{URL: url, AdminToken: servertest.AdminToken, JWTSecret: servertest.JWTSecret,
		Users: 40, Qty: 1, Concurrency: 8, Requests: 200}
	o := base
	o.CreateSale = "total=1000,limit=3,ticket=1,pow=6"
	rep, err := loadtest.Run(context.Background(), o)
	var b strings.Builder
	rep.Print(&b)
	if err != nil || rep.Tickets == nil || rep.Tickets.Fetched != 40 || rep.Tickets.Hashes < 40 || rep.Outcomes["ok"] == 0 ||
		rep.Outcomes["ticket_required"]+rep.Outcomes["ticket_invalid"] != 0 || !strings.Contains(b.String(), "proof of work 6 bits") {
		t.Fatalf("run with tickets: %v\n%s", err, b.String())
	}

	o = base
	o.SaleID, o.NoTickets = rep.SaleID, true
	rep, err = loadtest.Run(context.Background(), o)
	b.Reset()
	rep.Print(&b)
	if err != nil || rep.Tickets != nil || rep.Outcomes["ticket_required"] != 200 || rep.Accepted != 0 {
		t.Fatalf("run without tickets: %v\n%s", err, b.String())
	}
}

// TestSignInWithoutSecret: without the signing secret, users sign in
// through POST /api/session.
func TestSignInWithoutSecret(t *testing.T) {
	url := stack(t)
	rep, err := loadtest.Run(context.Background(), loadtest.Options{
		URL: url, AdminToken: servertest.AdminToken, Users: 20, Qty: 1, Concurrency: 4, Requests: 100,
		CreateSale: "total=50,limit=1",
	})
	if err != nil || rep.Accepted == 0 {
		t.Fatalf("%v, %+v", err, rep)
	}
}

// TestVerifiedAccounts: the load tool signs its users up as accounts,
// confirms each by the link mailed to its own mailbox, and buys on a sale
// for verified shoppers only; the audit passes.
func TestVerifiedAccounts(t *testing.T) {
	mb, err := mailbox.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	env := servertest.New(t, "SECKILL_IDENTITY=accounts", "SECKILL_SMTP_ADDR="+mb.Addr, "SECKILL_RATE_SIGNUP_PER_IP=0")
	url := servertest.HTTP(t, env.Server(t, nil).Handler()).URL
	rep, err := loadtest.Run(context.Background(), loadtest.Options{
		// 400 requests over 20 users: each is picked (all but surely) and
		// buys its one unit.
		URL: url, AdminToken: servertest.AdminToken, Users: 20, Qty: 1, Concurrency: 4, Requests: 400,
		CreateSale: "total=30,limit=1,verified=1", Accounts: true, Mailbox: mb,
	})
	var b strings.Builder
	rep.Print(&b)
	if err != nil || rep.Accepted != 20 || rep.Outcomes["not_eligible"] != 0 || !rep.Audit.Passed {
		t.Fatalf("accounts run: %v\n%s", err, b.String())
	}
	// The sale is verified_only: guests (minted with the secret) are refused.
	rep, err = loadtest.Run(context.Background(), loadtest.Options{
		URL: url, AdminToken: servertest.AdminToken, JWTSecret: servertest.JWTSecret, Users: 5, Qty: 1, Concurrency: 2,
		Requests: 20, SaleID: rep.SaleID,
	})
	b.Reset()
	rep.Print(&b)
	if rep.Outcomes["not_eligible"] != 20 || rep.Accepted != 0 {
		t.Fatalf("accounts run: %v\n%s", err, b.String())
	}
}

// overseller is a test double of a broken server: it accepts every buy,
// whatever the stock, and reports what it sold (or lies about it).
type overseller struct {
	mu    sync.Mutex
	sold  int64
	total int64
	lie   bool // report sold capped at total
}

func (s *overseller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/api/sales/1/buy":
		s.sold++
		fmt.Fprintf(w, `{"order_id":"o-%d","sale_id":1,"qty":1,"remaining":%d,"status":"pending"}`, s.sold, s.total-s.sold)
	case r.Method == "GET" && r.URL.Path == "/api/sales/1":
		sold := s.sold
		if s.lie {
			sold = min(sold, s.total)
		}
		fmt.Fprintf(w, `{"id":1,"total":%d,"remaining":%d,"sold":%d,"per_user_limit":1}`, s.total, s.total-sold, sold)
	default:
		http.NotFound(w, r)
	}
}

// TestAuditCatchesOversell: fed a server that ignores stock, the audit
// fails and says what.
func TestAuditCatchesOversell(t *testing.T) {
	for _, lie := range []bool{false, true} {
		ts := httptest.NewServer(&overseller{total: 10, lie: lie})
		rep, err := loadtest.Run(context.Background(), loadtest.Options{
			URL: ts.URL, SaleID: 1, JWTSecret: "any-secret-will-do-here", Users: 5, Qty: 1, Concurrency: 4, Requests: 40,
		})
		ts.Close()
		if !errors.Is(err, loadtest.ErrAudit) || rep.Audit.Passed {
			t.Fatalf("lie=%v: oversell not caught: %v %+v", lie, err, rep.Audit)
		}
		want := "no oversell"
		if lie {
			want = "units the sale sold"
		}
		if !strings.Contains(strings.Join(rep.Audit.Failures, "\n"), want) {
			t.Errorf("lie=%v: failures %q lack %q", lie, rep.Audit.Failures, want)
		}
		if !strings.Contains(strings.Join(rep.Audit.Failures, "\n"), "per-user limit") {
			t.Errorf("lie=%v: per-user limit breach not reported: %q", lie, rep.Audit.Failures)
		}
	}
}

// TestMerge: merged runs add their counts and time, and their latencies
// come from the merged histograms.
func TestMerge(t *testing.T) {
	run := func(n int64, latencyUS int64, passed bool) loadtest.Report {
		h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
		for range n {
			_ = h.RecordValue(latencyUS)
		}
		return loadtest.Report{Requests: n, Seconds: 1, Outcomes: map[string]int64{"ok": n}, Accepted: n, UnitsBought: n,
			Hist: h, Audit: loadtest.Audit{Passed: passed}}
	}
	m := loadtest.Merge([]loadtest.Report{run(100, 1000, true), run(300, 3000, true)})
	if m.Requests != 400 || m.Seconds != 2 || m.RPS != 200 || m.Outcomes["ok"] != 400 || m.Accepted != 400 || !m.Audit.Passed {
		t.Errorf("merged %+v", m)
	}
	if m.Latency.P50 < 2.99 || m.Latency.P50 > 3.01 || m.Latency.Max < 2.99 {
		t.Errorf("merged latency %+v, want p50 and max 3ms", m.Latency)
	}
	if loadtest.Merge([]loadtest.Report{run(1, 1, true), run(1, 1, false)}).Audit.Passed {
		t.Error("a failed audit passed once merged")
	}
}

// TestCrowd: a crowd of 400 joins a waiting room before its start and 50
// after it; every one is let in at the rate, buys with its pass, and the
// fairness audit passes.
func TestCrowd(t *testing.T) {
	url := stack(t)
	rep, err := loadtest.Crowd(context.Background(), loadtest.CrowdOptions{
		URL: url, AdminToken: servertest.AdminToken, JWTSecret: servertest.JWTSecret,
		Shoppers: 400, Late: 50, Lead: 3 * time.Second, AdmitPerSecond: 300, Watchers: 4,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	if rep.Joined != 450 || rep.Admitted != 450 || rep.Bought != 450 || len(rep.Audit.Checks) < 6 || rep.Frames < 5 {
		t.Errorf("crowd:\n%s", rep)
	}
	t.Logf("\n%s", rep)
}

// TestSpearman: the rank correlation of places in order is 1, reversed
// -1, and two swaps of neighbours 0.8 (1 - 6·4/(5·24)).
func TestSpearman(t *testing.T) {
	up, down := []int64{1, 2, 3, 4, 5}, []int64{50, 40, 30, 20, 10}
	if r := loadtest.Spearman(up); r != 1 {
		t.Errorf("rising: %v", r)
	}
	if r := loadtest.Spearman(down); r != -1 {
		t.Errorf("falling: %v", r)
	}
	if r := loadtest.Spearman([]int64{2, 1, 4, 3, 5}); math.Abs(r-0.8) > 1e-9 {
		t.Errorf("2 1 4 3 5: %v, want 0.8", r)
	}
}
