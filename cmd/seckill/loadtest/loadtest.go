// Package loadtest is `seckill loadtest`: it hammers a running server's buy
// endpoint, closed loop (c workers as fast as answers come) or open loop (a
// fixed request rate, latency measured from each request's scheduled time
// so it is free of coordinated omission), records latencies in an HDR
// histogram, and then audits what the server answered against the sale's
// state: no oversell, no user above the limit, idempotent retries, and
// optionally every accepted order persisted.
package loadtest

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity/mailbox"
	"github.com/seckill/seckill/internal/signed"
	"github.com/seckill/seckill/room"
	"github.com/seckill/seckill/tickets"
)

// Options describe a run.
type Options struct {
	URL        string
	SaleID     int64  // the sale to hit; 0 means create one with CreateSale
	CreateSale string // "total=1000,limit=2,price=100,start=0s,duration=1h"
	AdminToken string // creates the sale and reads its stats

	Users     int
	JWTSecret string // mint tokens offline; empty: POST /api/session per user
	// Accounts signs each user up as a built-in account through the API
	// (POST /api/accounts), reads the verification mail that the server
	// sends to Mailbox, confirms it (POST /api/accounts/verify) and buys
	// with the verified session: what a sale for verified shoppers costs
	// to enter. The server's sign-up limit must allow as many.
	Accounts bool
	Mailbox  *mailbox.Mailbox
	Qty      int64
	Retries  float64 // share of requests that resend an earlier request_id

	Concurrency int           // closed loop workers
	Rate        float64       // open loop requests/s; > 0 selects open loop
	MaxInFlight int           // open loop cap on outstanding requests
	Duration    time.Duration // run length, unless Requests is set
	Requests    int           // total requests; 0 means run for Duration

	WaitPersist time.Duration // also audit MySQL's orders within this time
	NoAudit     bool          // skip the audit (for routes that do not buy)
	// NoTickets sends buys without tickets even when the sale requires
	// them (to measure the refusals); otherwise each user gets a ticket
	// before the run, as a client would, and renews it when it runs out.
	NoTickets bool
	// Path is the buy route with %d for the sale id; empty means API.md's
	// /api/sales/%d/buy (the benchmark suite points it at a baseline).
	Path string

	// Pay is the share of accepted orders each buyer pays at once (POST
	// /api/orders/{id}/pay), as most shoppers do; Fund, if set, is
	// called once for a user before its first payment (to fill its
	// wallet), so the money arrives spread over the run, not all at once.
	Pay  float64
	Fund func(ctx context.Context, user string) error

	Progress io.Writer // a line a second; nil for none
	Client   *http.Client
}

// Report is the outcome of a run, as printed and as --json writes it.
type Report struct {
	URL       string           `json:"url"`
	SaleID    int64            `json:"sale_id"`
	Mode      string           `json:"mode"`
	Users     int              `json:"users"`
	Requests  int64            `json:"requests"`
	Seconds   float64          `json:"seconds"`
	RPS       float64          `json:"rps"`
	Latency   Latency          `json:"latency_ms"`
	Outcomes  map[string]int64 `json:"outcomes"`
	Transport int64            `json:"transport_errors"`
	// Paid and PayRefused count the payments made with Options.Pay.
	Paid        int64  `json:"paid,omitempty"`
	PayRefused  int64  `json:"pay_refused,omitempty"`
	FirstError  string `json:"first_transport_error,omitempty"`
	Accepted    int64  `json:"orders_accepted"`
	UnitsBought int64  `json:"units_bought"`
	Audit       Audit  `json:"audit"`
	// PersistSeconds is how long after the last answer the ledger held
	// every accepted order (with WaitPersist).
	PersistSeconds float64 `json:"persist_seconds,omitempty"`
	// Tickets is what getting buy tickets cost (sales with require_ticket).
	Tickets *TicketCost `json:"tickets,omitempty"`

	// Hist holds the latencies in microseconds (for Merge).
	Hist *hdrhistogram.Histogram `json:"-"`
}

// Merge adds up reports of runs against the same route (the benchmark
// suite interleaves short runs of its contenders): counts and time add,
// latency percentiles come from the merged histograms, and the audit
// passes if every run's did.
func Merge(reps []Report) Report {
	if len(reps) == 0 {
		return Report{}
	}
	m := reps[0]
	m.Outcomes = map[string]int64{}
	m.Hist = hdrhistogram.Import(reps[0].Hist.Export())
	m.Audit = Audit{Passed: true}
	m.Requests, m.Seconds, m.Transport, m.Accepted, m.UnitsBought = 0, 0, 0, 0, 0
	for i, r := range reps {
		m.Requests += r.Requests
		m.Seconds += r.Seconds
		m.Transport += r.Transport
		m.Accepted += r.Accepted
		m.UnitsBought += r.UnitsBought
		for k, v := range r.Outcomes {
			m.Outcomes[k] += v
		}
		if i > 0 {
			m.Hist.Merge(r.Hist)
		}
		m.Audit.Passed = m.Audit.Passed && r.Audit.Passed
		m.Audit.Checks = append(m.Audit.Checks, r.Audit.Checks...)
		m.Audit.Failures = append(m.Audit.Failures, r.Audit.Failures...)
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
	}
	m.RPS = float64(m.Requests) / m.Seconds
	m.Latency = latencyOf(m.Hist)
	return m
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	msq := func(v int64) float64 { return float64(v) / 1000 }
	return Latency{
		P50: msq(h.ValueAtQuantile(50)), P90: msq(h.ValueAtQuantile(90)), P99: msq(h.ValueAtQuantile(99)),
		P999: msq(h.ValueAtQuantile(99.9)), Max: msq(h.Max()), Mean: h.Mean() / 1000,
	}
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Audit lists what was checked and what failed.
type Audit struct {
	Passed   bool     `json:"passed"`
	Checks   []string `json:"checks"`
	Failures []string `json:"failures,omitempty"`
}

func (a *Audit) check(ok bool, what string, args ...any) {
	msg := fmt.Sprintf(what, args...)
	a.Checks = append(a.Checks, msg)
	if !ok {
		a.Failures = append(a.Failures, msg)
	}
}

// TicketCost is the time and work spent on buy tickets, apart from the
// buys: before the run (every user) and during it (renewals).
type TicketCost struct {
	Fetched       int64   `json:"fetched"`
	Renewed       int64   `json:"renewed"`
	Failed        int64   `json:"failed"`
	SecondsBefore float64 `json:"seconds_before"` // wall time of the fetch before the run
	SecondsDuring float64 `json:"seconds_during"` // time renewals added to buys (summed over workers)
	Hashes        int64   `json:"hashes"`         // proof-of-work nonces tried
	Difficulty    int     `json:"difficulty"`
}

// ticket is a user's buy ticket and when it runs out.
type ticket struct {
	text string
	exp  time.Time
}

// ErrAudit is returned (wrapped) when the run finished but its audit failed.
var ErrAudit = errors.New("audit failed")

// user is a shopper of the run.
type user struct {
	id, token string
}

// sent is one request as sent, kept for retries and the audit.
type sent struct {
	user  int
	rid   string
	qty   int64
	order string // the order id of a 200 answer
}

// run is the state of one load run.
type run struct {
	o     Options
	c     *client
	users []user
	id    string

	hist      *hdrhistogram.Histogram
	mu        sync.Mutex
	outcomes  map[string]int64
	orders    map[string]sent   // order id → the request that got it
	byRID     map[string]string // request id → its order id (200s)
	conflicts []string          // request ids answered with two order ids
	recent    []sent            // recent requests, for deliberate retries
	firstErr  string

	sentN, doneN, okN, transport atomic.Int64
	paid, payRefused             atomic.Int64
	funded                       sync.Map // user id → *sync.Once of its Fund
	minRemaining                 atomic.Int64

	// tickets holds each user's buy ticket, when the sale needs them.
	tickets                                 []atomic.Pointer[ticket]
	difficulty                              int
	fetched, renewed, failed, hashes, renew atomic.Int64 // renew: ns spent renewing
}

// Run performs the load run and its audit. The error wraps ErrAudit when
// the audit failed; the report is complete either way.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Users < 1 || o.Qty < 1 || (o.Rate <= 0 && o.Concurrency < 1) || (o.Duration <= 0 && o.Requests <= 0) {
		return Report{}, errors.New("loadtest: need users ≥ 1, qty ≥ 1, -c ≥ 1 or --rate > 0, and --duration or -n")
	}
	r := newRun(o)
	var err error
	if o.SaleID == 0 {
		if r.o.SaleID, err = r.c.createSale(ctx, o.CreateSale, r.id); err != nil {
			return Report{}, err
		}
		o.SaleID = r.o.SaleID
	}
	before, err := r.c.sale(ctx, o.SaleID)
	if err != nil {
		return Report{}, err
	}
	var persistedBefore int64
	if o.WaitPersist > 0 {
		st, err := r.c.stats(ctx, o.SaleID)
		if err != nil {
			return Report{}, fmt.Errorf("--wait-persist reads the sale's stats with the admin token: %w", err)
		}
		persistedBefore = st.OrdersPersisted
	}
	if r.users, err = r.makeUsers(ctx); err != nil {
		return Report{}, err
	}
	var ticketsBefore time.Duration
	if before.RequireTicket && !o.NoTickets {
		t0 := time.Now()
		if err := r.fetchTickets(ctx, before.PowDifficulty); err != nil {
			return Report{}, err
		}
		ticketsBefore = time.Since(t0)
	}

	start := time.Now()
	rctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.sampleRemaining(rctx) })
	bg.Go(func() { r.progress(rctx, start) })
	mode := "closed"
	if o.Rate > 0 {
		mode = "open"
		r.openLoop(ctx)
	} else {
		r.closedLoop(ctx)
	}
	elapsed := time.Since(start)
	stop()
	bg.Wait()

	rep := r.report(mode, elapsed)
	if r.tickets != nil {
		rep.Tickets = &TicketCost{Fetched: r.fetched.Load(), Renewed: r.renewed.Load(), Failed: r.failed.Load(),
			SecondsBefore: ticketsBefore.Seconds(), SecondsDuring: time.Duration(r.renew.Load()).Seconds(),
			Hashes: r.hashes.Load(), Difficulty: r.difficulty}
	}
	if o.NoAudit {
		return rep, nil
	}
	after, err := r.c.sale(ctx, o.SaleID)
	if err != nil {
		return rep, err
	}
	r.audit(ctx, &rep, before, after, persistedBefore)
	if !rep.Audit.Passed {
		return rep, fmt.Errorf("%w: %s", ErrAudit, strings.Join(rep.Audit.Failures, "; "))
	}
	return rep, nil
}

// WriteTokens makes o.Users users (as a run would) and writes their tokens
// to path, one per line, for other load tools. With the signing secret and
// a sale (o.SaleID) that requires tickets, each line also holds a buy
// ticket for it, after a space, and for a sale with a waiting room an
// admission pass after "pass:", minted offline with the same secret (as
// if each user had been let in).
func WriteTokens(ctx context.Context, o Options, path string) error {
	r := newRun(o)
	users, err := r.makeUsers(ctx)
	if err != nil {
		return err
	}
	var key, passKey []byte
	if o.SaleID > 0 && o.JWTSecret != "" {
		sale, err := r.c.sale(ctx, o.SaleID)
		if err != nil {
			return err
		}
		if sale.RequireTicket {
			key = tickets.Tickets.Key(o.JWTSecret)
		}
		if sale.WaitingRoom {
			passKey = room.Passes.Key(o.JWTSecret)
		}
	}
	var b strings.Builder
	exp := time.Now().Add(2 * time.Hour)
	for _, u := range users {
		b.WriteString(u.token)
		if key != nil {
			b.WriteString(" " + signed.Mint(key, u.id, o.SaleID, exp))
		}
		if passKey != nil {
			b.WriteString(" pass:" + signed.Mint(passKey, u.id, o.SaleID, exp))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func newRun(o Options) *run {
	if o.Client == nil {
		o.Client = newHTTPClient(max(o.Concurrency, o.MaxInFlight, 64))
	}
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	r := &run{
		o: o, c: &client{base: strings.TrimRight(o.URL, "/"), http: o.Client, admin: o.AdminToken, buyPath: o.Path},
		hist:     hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
		outcomes: map[string]int64{}, orders: map[string]sent{}, byRID: map[string]string{},
		id: hex.EncodeToString(b),
	}
	r.minRemaining.Store(1 << 62)
	return r
}

func newHTTPClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns * 2
	t.MaxIdleConnsPerHost = conns * 2
	t.MaxConnsPerHost = 0
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// fetchTickets gets every user a buy ticket (solving the proof of work
// when the sale has one), 32 at a time.
func (r *run) fetchTickets(ctx context.Context, difficulty int) error {
	r.tickets, r.difficulty = make([]atomic.Pointer[ticket], len(r.users)), difficulty
	var wg sync.WaitGroup
	errs := make([]error, len(r.users))
	sem := make(chan struct{}, 32)
	for i := range r.users {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = r.getTicket(ctx, i)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("loadtest: buy tickets: %w", err)
	}
	r.fetched.Store(int64(len(r.users)))
	return nil
}

func (r *run) getTicket(ctx context.Context, u int) error {
	text, exp, hashes, err := r.c.ticket(ctx, r.o.SaleID, r.users[u].token, r.difficulty)
	r.hashes.Add(hashes)
	if err != nil {
		r.failed.Add(1)
		return err
	}
	r.tickets[u].Store(&ticket{text: text, exp: exp})
	return nil
}

// ticketOf is user u's ticket for a buy, renewed when it has less than
// 5 s left; spent is the time a renewal took (counted apart from the
// buy's latency).
func (r *run) ticketOf(ctx context.Context, u int) (text string, spent time.Duration) {
	if r.tickets == nil {
		return "", 0
	}
	t := r.tickets[u].Load()
	if t != nil && time.Until(t.exp) > 5*time.Second {
		return t.text, 0
	}
	t0 := time.Now()
	if r.getTicket(ctx, u) == nil {
		r.renewed.Add(1)
	}
	spent = time.Since(t0)
	r.renew.Add(int64(spent))
	if t = r.tickets[u].Load(); t == nil {
		return "", spent
	}
	return t.text, spent
}

// makeUsers mints a token per user with the secret, or signs each in.
func (r *run) makeUsers(ctx context.Context) ([]user, error) {
	users := make([]user, r.o.Users)
	for i := range users {
		users[i].id = fmt.Sprintf("lt_%s_%d", r.id, i)
	}
	if r.o.Accounts {
		return r.signUpUsers(ctx, users)
	}
	if r.o.JWTSecret != "" {
		for i := range users {
			tok, err := mintToken(r.o.JWTSecret, users[i].id)
			if err != nil {
				return nil, err
			}
			users[i].token = tok
		}
		return users, nil
	}
	return users, eachUser(users, func(u *user) (err error) {
		u.id, u.token, err = r.c.session(ctx, u.id)
		return err
	})
}

// eachUser runs fn on every user, 32 at a time, as so many shoppers
// signing in at once would.
func eachUser(users []user, fn func(u *user) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(users))
	sem := make(chan struct{}, 32)
	for i := range users {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(&users[i])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// signUpUsers opens an account for each user and confirms its email by
// the link the server mailed.
func (r *run) signUpUsers(ctx context.Context, users []user) ([]user, error) {
	if r.o.Mailbox == nil {
		return nil, errors.New("loadtest: accounts need a mailbox to read the verification mail from")
	}
	return users, eachUser(users, func(u *user) error {
		email := strings.ReplaceAll(u.id, "_", "-") + "@loadtest.example"
		id, tok, err := r.c.signUp(ctx, email, "loadtest password "+r.id)
		if err != nil {
			return err
		}
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		link, err := r.o.Mailbox.Token(mctx, email, 1)
		cancel()
		if err != nil {
			return err
		}
		if tok, err = r.c.verify(ctx, link, tok); err != nil {
			return err
		}
		u.id, u.token = id, tok
		return nil
	})
}

// next picks what to send: usually a fresh request_id for a random user,
// sometimes (Retries) an earlier request again.
func (r *run) next(rng *rand.Rand) sent {
	if r.o.Retries > 0 && rng.Float64() < r.o.Retries {
		r.mu.Lock()
		n := len(r.recent)
		var s sent
		if n > 0 {
			s = r.recent[rng.IntN(n)]
		}
		r.mu.Unlock()
		if n > 0 {
			s.order = ""
			return s
		}
	}
	seq := r.sentN.Load()
	return sent{user: rng.IntN(len(r.users)), rid: fmt.Sprintf("lt-%s-%d-%d", r.id, seq, rng.Uint32()), qty: r.o.Qty}
}

// pay pays an accepted order as its buyer, its wallet funded first (once),
// counting what it was answered.
func (r *run) pay(ctx context.Context, order string, u *user) {
	if r.o.Fund != nil {
		once, _ := r.funded.LoadOrStore(u.id, new(sync.Once))
		var err error
		once.(*sync.Once).Do(func() { err = r.o.Fund(ctx, u.id) })
		if err != nil {
			r.payRefused.Add(1)
			return
		}
	}
	if _, err := r.c.do(ctx, "POST", "/api/orders/"+order+"/pay", u.token, nil, nil); err != nil {
		r.payRefused.Add(1)
		return
	}
	r.paid.Add(1)
}

// fire sends one buy and records its answer; latency counts from t0.
func (r *run) fire(ctx context.Context, s sent, t0 time.Time) {
	tk, spent := r.ticketOf(ctx, s.user)
	t0 = t0.Add(spent) // a renewal is not the buy's latency
	r.sentN.Add(1)
	status, code, order, err := r.c.buy(ctx, r.o.SaleID, r.users[s.user].token, s.qty, s.rid, tk)
	lat := time.Since(t0)
	r.doneN.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.hist.RecordValue(max(1, lat.Microseconds()))
	if err != nil {
		r.transport.Add(1)
		if r.firstErr == "" {
			r.firstErr = err.Error()
		}
		return
	}
	if status == http.StatusOK && r.o.Pay > 0 && rand.Float64() < r.o.Pay {
		go r.pay(ctx, order, &r.users[s.user])
	}
	if status == http.StatusOK {
		code = string(seckill.CodeOK)
		r.okN.Add(1)
		if prev, ok := r.byRID[s.rid]; ok && prev != order {
			r.conflicts = append(r.conflicts, s.rid)
		}
		r.byRID[s.rid] = order
		s.order = order
		r.orders[order] = s
	}
	r.outcomes[code]++
	if len(r.recent) < 4096 {
		r.recent = append(r.recent, s)
	} else {
		r.recent[rand.IntN(len(r.recent))] = s
	}
}

func (r *run) closedLoop(ctx context.Context) {
	start := time.Now()
	var wg sync.WaitGroup
	var claimed atomic.Int64
	for w := range r.o.Concurrency {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for ctx.Err() == nil {
				if r.o.Requests > 0 && claimed.Add(1) > int64(r.o.Requests) {
					return
				}
				if r.o.Requests == 0 && time.Since(start) >= r.o.Duration {
					return
				}
				r.fire(ctx, r.next(rng), time.Now())
			}
		})
	}
	wg.Wait()
}

// openLoop sends at a fixed schedule; a request's latency counts from when
// it was due, so a slow server cannot hide its queueing by slowing the
// sender down.
func (r *run) openLoop(ctx context.Context) {
	start := time.Now()
	interval := time.Duration(float64(time.Second) / r.o.Rate)
	limit := r.o.MaxInFlight
	if limit <= 0 {
		limit = 10_000
	}
	sem := make(chan struct{}, limit)
	rng := rand.New(rand.NewPCG(1, uint64(start.UnixNano())))
	var wg sync.WaitGroup
	for i := 0; ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if r.o.Requests > 0 && i >= r.o.Requests || r.o.Requests == 0 && due.Sub(start) >= r.o.Duration {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		s := r.next(rng)
		wg.Go(func() {
			defer func() { <-sem }()
			r.fire(ctx, s, due)
		})
	}
	wg.Wait()
}

// sampleRemaining reads the sale's remaining stock during the run; the
// audit checks it never went below zero.
func (r *run) sampleRemaining(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if s, err := r.c.sale(ctx, r.o.SaleID); err == nil {
			for {
				cur := r.minRemaining.Load()
				if s.Remaining >= cur || r.minRemaining.CompareAndSwap(cur, s.Remaining) {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *run) progress(ctx context.Context, start time.Time) {
	if r.o.Progress == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, lastAt := int64(0), start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			done := r.doneN.Load()
			rps := float64(done-last) / now.Sub(lastAt).Seconds()
			last, lastAt = done, now
			r.mu.Lock()
			out := outcomeLine(r.outcomes)
			r.mu.Unlock()
			fmt.Fprintf(r.o.Progress, "%6.1fs  sent %d  done %d  %.0f req/s  %s  transport errors %d\n",
				now.Sub(start).Seconds(), r.sentN.Load(), done, rps, out, r.transport.Load())
		}
	}
}

func outcomeLine(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func (r *run) report(mode string, elapsed time.Duration) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	var units int64
	for _, s := range r.orders {
		units += s.qty
	}
	out := map[string]int64{}
	for k, v := range r.outcomes {
		out[k] = v
	}
	return Report{
		URL: r.c.base, SaleID: r.o.SaleID, Mode: mode, Users: len(r.users),
		Requests: r.doneN.Load(), Seconds: elapsed.Seconds(), RPS: float64(r.doneN.Load()) / elapsed.Seconds(),
		Latency: latencyOf(r.hist), Hist: r.hist,
		Outcomes: out, Transport: r.transport.Load(), FirstError: r.firstErr, Paid: r.paid.Load(), PayRefused: r.payRefused.Load(),
		Accepted: int64(len(r.orders)), UnitsBought: units,
	}
}

// audit compares the answers with the sale's state before and after.
func (r *run) audit(ctx context.Context, rep *Report, before, after saleView, persistedBefore int64) {
	a := &rep.Audit
	r.mu.Lock()
	perUser := map[int]int64{}
	for _, s := range r.orders {
		perUser[s.user] += s.qty
	}
	conflicts := len(r.conflicts)
	r.mu.Unlock()

	sold := after.Sold - before.Sold
	a.check(rep.UnitsBought == sold, "units bought per the 200 answers (%d) = units the sale sold during the run (%d)", rep.UnitsBought, sold)
	a.check(after.Sold <= after.Total, "sold (%d) ≤ total (%d): no oversell", after.Sold, after.Total)
	worst := int64(0)
	for _, n := range perUser {
		worst = max(worst, n)
	}
	a.check(worst <= after.PerUserLimit, "no user above the per-user limit %d (most bought by one user: %d)", after.PerUserLimit, worst)
	minRem := min(r.minRemaining.Load(), after.Remaining)
	a.check(minRem >= 0, "remaining never below zero (lowest seen %d)", minRem)
	a.check(after.Remaining == after.Total-after.Sold, "remaining (%d) = total (%d) − sold (%d)", after.Remaining, after.Total, after.Sold)
	a.check(conflicts == 0, "retried request_ids got their original order (%d conflicts)", conflicts)
	bad := rep.Outcomes[string(seckill.CodeInvalid)] + rep.Outcomes[string(seckill.CodeUnauthenticated)] +
		rep.Outcomes[string(seckill.CodeBodyTooLarge)]
	a.check(bad == 0, "the server took the load as well-formed and authenticated (%d answers 400/401/413)", bad)
	if r.o.WaitPersist > 0 {
		want := persistedBefore + rep.Accepted
		start := time.Now()
		got, err := r.c.waitPersisted(ctx, r.o.SaleID, want, r.o.WaitPersist)
		rep.PersistSeconds = time.Since(start).Seconds()
		if err != nil {
			a.check(false, "orders persisted in MySQL: %v", err)
		} else {
			a.check(got == want, "the ledger holds the %d accepted orders within %s (has %d new)", rep.Accepted, r.o.WaitPersist, got-persistedBefore)
		}
	}
	a.Passed = len(a.Failures) == 0
}

// OutcomeLine lists the answers by code, sorted: "ok 10, sold_out 3".
func (rep Report) OutcomeLine() string { return outcomeLine(rep.Outcomes) }

// Print writes the human report.
func (rep Report) Print(w io.Writer) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nseckill loadtest: %s loop against %s, sale %d, %d users\n", rep.Mode, rep.URL, rep.SaleID, rep.Users)
	fmt.Fprintf(&b, "  requests        %d in %.2fs = %.0f req/s\n", rep.Requests, rep.Seconds, rep.RPS)
	l := rep.Latency
	fmt.Fprintf(&b, "  latency ms      p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  (mean %.2f)\n", l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	fmt.Fprintf(&b, "  outcomes        %s\n", rep.OutcomeLine())
	fmt.Fprintf(&b, "  transport errs  %d %s\n", rep.Transport, rep.FirstError)
	fmt.Fprintf(&b, "  accepted        %d orders, %d units\n", rep.Accepted, rep.UnitsBought)
	if t := rep.Tickets; t != nil {
		fmt.Fprintf(&b, "  tickets         %d fetched in %.2fs before the run, %d renewed during it (%.2fs), %d failed",
			t.Fetched, t.SecondsBefore, t.Renewed, t.SecondsDuring, t.Failed)
		if t.Difficulty > 0 {
			fmt.Fprintf(&b, "; proof of work %d bits: %d hashes (%.0f a ticket)", t.Difficulty, t.Hashes,
				float64(t.Hashes)/float64(max(1, t.Fetched+t.Renewed)))
		}
		fmt.Fprintln(&b)
	}
	if rep.PersistSeconds > 0 {
		fmt.Fprintf(&b, "  ledger          every accepted order in within %.2fs of the last answer\n", rep.PersistSeconds)
	}
	verdict := "PASSED"
	if !rep.Audit.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "  audit           %s\n", verdict)
	failed := map[string]bool{}
	for _, f := range rep.Audit.Failures {
		failed[f] = true
	}
	for _, c := range rep.Audit.Checks {
		mark := "ok  "
		if failed[c] {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "    %s %s\n", mark, c)
	}
	_, _ = w.Write(b.Bytes())
}

// JSON writes the report as indented JSON.
func (rep Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
