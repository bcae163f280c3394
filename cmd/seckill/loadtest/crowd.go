package loadtest

import (
	"container/heap"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gorilla/websocket"
)

// CrowdOptions drive a sale with a waiting room like a crowd (API.md,
// Waiting room): Shoppers join at random moments before the start, Late
// more one after the other after it; each follows the room's queue
// frames as the shopper page does, reads its final place (a place drawn
// before the start is final only then) when the estimate of it nears the
// places let in, asks for its pass when its turn comes and buys one unit
// with it.
type CrowdOptions struct {
	URL        string
	AdminToken string // creates the sale
	JWTSecret  string // mints the shoppers' tokens offline
	// SaleID is a sale with a waiting room, whose queue is open and whose
	// start is ahead; 0 creates one that opens in Lead with stock for
	// every shopper and admits AdmitPerSecond.
	SaleID         int64
	Lead           time.Duration
	AdmitPerSecond int64
	Shoppers, Late int
	// Watchers is how many WebSocket connections follow the room (each
	// shopper reads the frames of one; default 20).
	Watchers int
	// Timeout bounds the whole run after the start.
	Timeout  time.Duration
	Progress io.Writer
	Client   *http.Client
}

// CrowdReport is what a crowd run saw.
type CrowdReport struct {
	SaleID         int64   `json:"sale_id"`
	Shoppers       int     `json:"shoppers"`
	Late           int     `json:"late"`
	AdmitPerSecond int64   `json:"admit_per_second"`
	Joined         int64   `json:"joined"`
	Admitted       int64   `json:"admitted"`
	Bought         int64   `json:"bought"`
	Refused        int64   `json:"buys_refused"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	MeasuredRate   float64 `json:"measured_admit_per_second"`
	// Wait is the seconds from the start (from the join, for late
	// shoppers) until a shopper saw its turn come.
	Wait Latency `json:"wait_s"`
	// FrameGap is the milliseconds between two queue frames at a watcher
	// while the room admitted.
	FrameGap Latency `json:"frame_gap_ms"`
	Frames   int64   `json:"frames"`
	// EarlyRho is Spearman's ρ between the order the pre-queue joined in
	// and their places; LateRho the same for those who joined after the
	// start; LateAhead the share of (joined in the last tenth before the
	// start, joined in the first tenth) pairs in which the later one is
	// ahead.
	EarlyRho  float64 `json:"early_rho"`
	LateRho   float64 `json:"late_rho"`
	LateAhead float64 `json:"late_ahead_share"`
	Audit     Audit   `json:"audit"`
}

// shopper is one member of the crowd.
type shopper struct {
	id, token string
	joinedAt  time.Time
	place     int64 // final place, read after the start
	turnAt    time.Time
	bought    bool
}

type queueAnswer struct {
	Place             int64     `json:"place"`
	AdmittedThrough   int64     `json:"admitted_through"`
	QueueSize         int64     `json:"queue_size"`
	JoinedBeforeStart int64     `json:"joined_before_start"`
	Status            string    `json:"status"`
	Pass              string    `json:"pass"`
	PassExpiresAt     time.Time `json:"pass_expires_at"`
}

// roomView is what the crowd's watchers know of the room: the last place
// let in, and the shoppers waiting for a number of places let in, woken
// only when it is reached (a crowd woken at every frame would delay the
// frames it measures).
type roomView struct {
	mu      sync.Mutex
	through int64
	early   int64 // joined before the start
	soldOut bool
	waiters waiterHeap
	marks   []admissionMark // watcher 0's frames, as they arrived
}

type admissionMark struct {
	at      time.Time
	through int64
}

// waiter is a shopper waiting until at least places are let in.
type waiter struct {
	places int64
	done   chan struct{}
}

// waiterHeap orders the waiters by the places they wait for.
type waiterHeap []waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].places < h[j].places }
func (h waiterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waiterHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

func (r *roomView) update(at time.Time, through, early int64, soldOut bool, watcher int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if watcher == 0 {
		r.marks = append(r.marks, admissionMark{at, through})
	}
	r.early = max(r.early, early)
	r.through = max(r.through, through)
	r.soldOut = r.soldOut || soldOut
	for r.waiters.Len() > 0 && (r.soldOut || r.waiters[0].places <= r.through) {
		close(heap.Pop(&r.waiters).(waiter).done)
	}
}

// wait blocks until places are let in (true) or the room sold out
// (false).
func (r *roomView) wait(ctx context.Context, places int64) bool {
	r.mu.Lock()
	if r.through >= places || r.soldOut {
		ok := r.through >= places
		r.mu.Unlock()
		return ok
	}
	w := waiter{places: places, done: make(chan struct{})}
	heap.Push(&r.waiters, w)
	r.mu.Unlock()
	select {
	case <-ctx.Done():
		return false
	case <-w.done:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.through >= places
}

// joinedEarly is how many joined before the start, as the frames say.
func (r *roomView) joinedEarly() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.early
}

// Crowd runs a crowd against a waiting room and audits its fairness.
func Crowd(ctx context.Context, o CrowdOptions) (CrowdReport, error) {
	if o.Shoppers < 2 || o.Late < 0 || o.JWTSecret == "" {
		return CrowdReport{}, errors.New("loadtest: a crowd needs --crowd ≥ 2 shoppers and the signing secret (--jwt-secret)")
	}
	if o.Watchers <= 0 {
		o.Watchers = 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Client == nil {
		o.Client = newHTTPClient(256)
	}
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	runID := hex.EncodeToString(b)
	c := &client{base: strings.TrimRight(o.URL, "/"), http: o.Client, admin: o.AdminToken}
	if o.SaleID == 0 {
		if o.Lead <= 0 {
			o.Lead = 10 * time.Second
		}
		if o.AdmitPerSecond <= 0 {
			o.AdmitPerSecond = 500
		}
		id, err := c.createRoomSale(ctx, runID, int64(o.Shoppers+o.Late), o.AdmitPerSecond, o.Lead)
		if err != nil {
			return CrowdReport{}, err
		}
		o.SaleID = id
	}
	var sale struct {
		StartsAt       time.Time `json:"starts_at"`
		WaitingRoom    bool      `json:"waiting_room"`
		AdmitPerSecond int64     `json:"admit_per_second"`
		QueueOpensAt   time.Time `json:"queue_opens_at"`
	}
	if _, err := c.do(ctx, "GET", fmt.Sprintf("/api/sales/%d", o.SaleID), "", nil, &sale); err != nil {
		return CrowdReport{}, err
	}
	if !sale.WaitingRoom || !time.Now().Before(sale.StartsAt) {
		return CrowdReport{}, fmt.Errorf("loadtest: sale %d must have a waiting room and start later (starts %v)", o.SaleID, sale.StartsAt)
	}
	rep := CrowdReport{SaleID: o.SaleID, Shoppers: o.Shoppers, Late: o.Late, AdmitPerSecond: sale.AdmitPerSecond}
	crowd := make([]*shopper, o.Shoppers+o.Late)
	for i := range crowd {
		s := &shopper{id: fmt.Sprintf("crowd_%s_%d", runID, i)}
		var err error
		if s.token, err = mintToken(o.JWTSecret, s.id); err != nil {
			return rep, err
		}
		crowd[i] = s
	}

	rm := &roomView{}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watchers sync.WaitGroup
	for w := range o.Watchers {
		watchers.Go(func() { c.watchRoom(wctx, o.SaleID, w, rm) })
	}

	var (
		mu       sync.Mutex
		errs     atomic.Int64
		firstErr string
	)
	fail := func(err error) {
		errs.Add(1)
		mu.Lock()
		if firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
	}
	rctx, cancel := context.WithDeadline(ctx, sale.StartsAt.Add(o.Timeout))
	defer cancel()
	var joined, admitted, bought, refused atomic.Int64
	// follow is a shopper's life after joining (j, the join's answer): its
	// final place, its turn, its pass, its buy. One who joined before the
	// start reads its final place as the page does, when the estimate of
	// it nears the places let in.
	follow := func(s *shopper, j queueAnswer) {
		s.place = j.Place
		var q queueAnswer // the last answer; with a pass once let in
		if s.joinedAt.Before(sale.StartsAt) {
			// The draws are all in a moment after the start (the frames
			// carry their count): the estimate is then fixed.
			select {
			case <-rctx.Done():
				return
			case <-time.After(time.Until(sale.StartsAt) + 300*time.Millisecond):
			}
			est, margin := EstimatePlace(j.Place, j.JoinedBeforeStart, rm.joinedEarly(), sale.AdmitPerSecond)
			if !rm.wait(rctx, int64(max(0, est-margin))) {
				return
			}
			if _, err := c.do(rctx, "GET", fmt.Sprintf("/api/sales/%d/queue", o.SaleID), s.token, nil, &q); err != nil {
				fail(err)
				return
			}
			s.place = q.Place
		}
		if !rm.wait(rctx, s.place) {
			return
		}
		s.turnAt = time.Now()
		admitted.Add(1)
		if q.Pass == "" {
			if _, err := c.do(rctx, "GET", fmt.Sprintf("/api/sales/%d/queue", o.SaleID), s.token, nil, &q); err != nil || q.Pass == "" {
				fail(fmt.Errorf("no pass at place %d with %d let in: %v", s.place, q.AdmittedThrough, err))
				return
			}
		}
		status, code, _, err := c.buyWith(rctx, o.SaleID, s.token, 1, s.id, map[string]any{"pass": q.Pass})
		switch {
		case err != nil:
			fail(err)
		case status == http.StatusOK:
			s.bought = true
			bought.Add(1)
		default:
			refused.Add(1)
			if code != "sold_out" {
				fail(fmt.Errorf("buy with a pass: %d %s", status, code))
			}
		}
	}
	join := func(s *shopper) (queueAnswer, error) {
		s.joinedAt = time.Now()
		var q queueAnswer
		if _, err := c.do(rctx, "POST", fmt.Sprintf("/api/sales/%d/queue", o.SaleID), s.token, nil, &q); err != nil {
			return q, err
		}
		joined.Add(1)
		return q, nil
	}

	var all sync.WaitGroup
	window := time.Until(sale.StartsAt) - 500*time.Millisecond
	if opens := time.Until(sale.QueueOpensAt); opens > 0 {
		return rep, fmt.Errorf("loadtest: sale %d's queue opens in %v: start the crowd once it is open", o.SaleID, opens)
	}
	for _, s := range crowd[:o.Shoppers] {
		at := rand.N(max(window, time.Millisecond))
		all.Go(func() {
			select {
			case <-rctx.Done():
				return
			case <-time.After(at):
			}
			j, err := join(s)
			if err != nil {
				fail(err)
				return
			}
			follow(s, j)
		})
	}
	stopProgress := progress(o.Progress, &joined, &admitted, &bought)
	// The late ones join after the start, one after the other.
	select {
	case <-rctx.Done():
	case <-time.After(time.Until(sale.StartsAt)):
	}
	for _, s := range crowd[o.Shoppers:] {
		j, err := join(s)
		if err != nil {
			fail(err)
			continue
		}
		all.Go(func() { follow(s, j) })
	}
	all.Wait()
	stopProgress()
	stopWatch()
	watchers.Wait()

	rep.Joined, rep.Admitted, rep.Bought, rep.Refused, rep.Errors, rep.FirstError = joined.Load(), admitted.Load(), bought.Load(), refused.Load(), errs.Load(), firstErr
	rep.measure(crowd, rm, sale.StartsAt)
	rep.audit(crowd)
	if !rep.Audit.Passed {
		return rep, fmt.Errorf("%w: %s", ErrAudit, strings.Join(rep.Audit.Failures, "; "))
	}
	return rep, nil
}

// progress prints a line a second until stopped.
func progress(w io.Writer, joined, admitted, bought *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "crowd: %d joined, %d let in, %d bought\n", joined.Load(), admitted.Load(), bought.Load())
			}
		}
	}()
	return func() { close(done) }
}

// measure works out the waits, the frames' gaps, the admission rate and
// the fairness figures.
func (rep *CrowdReport) measure(crowd []*shopper, rm *roomView, start time.Time) {
	wait := hdrhistogram.New(1, int64(time.Hour/time.Millisecond), 3)
	for i, s := range crowd {
		if s.turnAt.IsZero() {
			continue
		}
		from := start
		if i >= rep.Shoppers {
			from = s.joinedAt
		}
		_ = wait.RecordValue(max(1, s.turnAt.Sub(from).Milliseconds()))
	}
	rep.Wait = latencyOf(wait) // a ms histogram read as s
	// Frames while the room admitted: from the first that let anyone in
	// to the one that let the last in (or said sold out).
	gaps := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	marks := rm.marks
	first := slices.IndexFunc(marks, func(m admissionMark) bool { return m.through > 0 })
	if first >= 0 {
		last := first
		for i := first; i < len(marks); i++ {
			last = i
			if marks[i].through >= rep.Joined {
				break
			}
		}
		for i := first + 1; i <= last; i++ {
			_ = gaps.RecordValue(max(1, marks[i].at.Sub(marks[i-1].at).Microseconds()))
		}
		rep.Frames = int64(last - first + 1)
		rep.MeasuredRate = slope(marks[first : last+1])
	}
	rep.FrameGap = latencyOf(gaps) // µs histogram read as ms by latencyOf

	places := func(ss []*shopper) []int64 {
		out := make([]int64, 0, len(ss))
		for _, s := range ss {
			out = append(out, s.place)
		}
		return out
	}
	early := slices.Clone(crowd[:rep.Shoppers])
	slices.SortFunc(early, func(a, b *shopper) int { return a.joinedAt.Compare(b.joinedAt) })
	rep.EarlyRho = Spearman(places(early))
	rep.LateRho = Spearman(places(crowd[rep.Shoppers:]))
	tenth := max(1, len(early)/10)
	ahead, pairs := 0, 0
	for _, l := range early[len(early)-tenth:] {
		for _, e := range early[:tenth] {
			pairs++
			if l.place < e.place {
				ahead++
			}
		}
	}
	rep.LateAhead = float64(ahead) / float64(pairs)
}

// slope is the least-squares rate of the places let in over the frames'
// arrival: a late frame at either end moves it little.
func slope(marks []admissionMark) float64 {
	if len(marks) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, m := range marks {
		x, y := m.at.Sub(marks[0].at).Seconds(), float64(m.through)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(marks))
	if d := n*sxx - sx*sx; d > 0 {
		return (n*sxy - sx*sy) / d
	}
	return 0
}

// EstimatePlace is where a place drawn before the start (place among
// earlyAtJoin then) is expected to be once earlyNow have drawn, each later
// draw landing ahead of it with the chance place / earlyAtJoin, and a
// margin to read the true one before its turn: three standard deviations
// and 2 s of admission (the shopper page's estimatePlace).
func EstimatePlace(place, earlyAtJoin, earlyNow, rate int64) (est, margin float64) {
	if earlyAtJoin <= 0 {
		return float64(place), 0
	}
	later := float64(max(0, earlyNow-earlyAtJoin))
	f := min(1, float64(place)/float64(earlyAtJoin))
	return float64(place) + later*f, 3*math.Sqrt(later*f*(1-f)) + 2*float64(rate)
}

// Spearman is the rank correlation between the order of places (as
// given) and the places themselves: 1 when they rise with it, about 0
// when they bear no relation to it. Places are distinct.
func Spearman(places []int64) float64 {
	n := len(places)
	if n < 2 {
		return 1
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(places[a] - places[b]) })
	var d2 float64
	for rank, i := range idx {
		d := float64(rank - i)
		d2 += d * d
	}
	nf := float64(n)
	return 1 - 6*d2/(nf*(nf*nf-1))
}

// audit checks the run against the room's promises.
func (rep *CrowdReport) audit(crowd []*shopper) {
	a := &rep.Audit
	a.Passed = true
	seen := map[int64]bool{}
	dup, missing := 0, 0
	for _, s := range crowd {
		switch {
		case s.place == 0:
			missing++
		case seen[s.place]:
			dup++
		}
		seen[s.place] = true
	}
	total := int64(len(crowd))
	a.check(rep.Errors == 0, "no request failed (%d failed; first: %s)", rep.Errors, rep.FirstError)
	a.check(rep.Joined == total && missing == 0 && dup == 0, "every shopper joined once and holds a place of its own (%d joined of %d, %d without a place, %d shared)", rep.Joined, total, missing, dup)
	// Chance alone moves these figures by about 1/√n: the bounds are ±0.1,
	// or four of those for a crowd too small for ±0.1 to mean anything.
	rhoBound := max(0.1, 4/math.Sqrt(float64(rep.Shoppers-1)))
	a.check(math.Abs(rep.EarlyRho) <= rhoBound, "pre-queue: places bear no relation to the join order (Spearman ρ = %+.3f, within ±%.2f)", rep.EarlyRho, rhoBound)
	if rep.Late >= 2 {
		a.check(rep.LateRho >= 0.95, "after the start: places follow arrival (Spearman ρ = %+.3f, ≥ 0.95)", rep.LateRho)
	}
	if tenth := float64(max(1, rep.Shoppers/10)); rep.Shoppers >= 100 {
		bound := max(0.1, 4*math.Sqrt((2*tenth+1)/(12*tenth*tenth)))
		a.check(math.Abs(rep.LateAhead-0.5) <= bound, "one who joined in the last tenth before the start is ahead of one from the first tenth %.1f%% of the time (half, ±%.0f%%)", 100*rep.LateAhead, 100*bound)
	}
	if rep.Admitted == total && rep.Frames > 10 && rep.AdmitPerSecond > 0 {
		r := rep.MeasuredRate / float64(rep.AdmitPerSecond)
		a.check(r >= 0.9 && r <= 1.1, "the room let in %.1f a second for %d (within ±10%%)", rep.MeasuredRate, rep.AdmitPerSecond)
	}
	a.check(rep.Bought <= total, "no more bought than shoppers (%d)", rep.Bought)
}

// watchRoom follows the sale's queue frames into rm until ctx ends,
// reconnecting after a drop.
func (c *client) watchRoom(ctx context.Context, sale int64, watcher int, rm *roomView) {
	url := "ws" + strings.TrimPrefix(c.base, "http") + fmt.Sprintf("/ws/sales/%d", sale)
	for ctx.Err() == nil {
		conn, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		for {
			_, data, err := conn.ReadMessage()
			at := time.Now()
			if err != nil {
				break
			}
			var f struct {
				Type              string `json:"type"`
				AdmittedThrough   int64  `json:"admitted_through"`
				JoinedBeforeStart int64  `json:"joined_before_start"`
				Status            string `json:"status"`
			}
			if json.Unmarshal(data, &f) == nil && f.Type == "queue" {
				rm.update(at, f.AdmittedThrough, f.JoinedBeforeStart, f.Status == "sold_out", watcher)
			}
		}
		stop()
		conn.Close()
	}
}

// createRoomSale creates a sale with a waiting room that opens now and
// starts in lead, with total units, one a shopper.
func (c *client) createRoomSale(ctx context.Context, runID string, total, rate int64, lead time.Duration) (int64, error) {
	if c.admin == "" {
		return 0, errors.New("creating a sale needs the admin token (--admin-token or SECKILL_ADMIN_TOKEN); or pass --sale")
	}
	start := time.Now().Add(lead).UTC()
	var s saleView
	_, err := c.do(ctx, "POST", "/admin/api/sales", c.admin, map[string]any{
		"name": "crowd " + runID, "item": "crowd item", "price_cents": 100, "total": total, "per_user_limit": 1,
		"starts_at": start.Format(time.RFC3339Nano), "ends_at": start.Add(time.Hour).Format(time.RFC3339Nano),
		"waiting_room": true, "queue_opens_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), "admit_per_second": rate,
	}, &s)
	if err != nil {
		return 0, fmt.Errorf("create sale: %w", err)
	}
	return s.ID, nil
}

// String renders the report for people.
func (rep CrowdReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crowd on sale %d: %d before the start + %d after, let in %d a second\n", rep.SaleID, rep.Shoppers, rep.Late, rep.AdmitPerSecond)
	fmt.Fprintf(&b, "  joined %d, let in %d, bought %d, buys refused %d, errors %d\n", rep.Joined, rep.Admitted, rep.Bought, rep.Refused, rep.Errors)
	fmt.Fprintf(&b, "  admission       %.1f a second measured over %d frames\n", rep.MeasuredRate, rep.Frames)
	fmt.Fprintf(&b, "  wait for a turn p50 %.1fs  p99 %.1fs  max %.1fs\n", rep.Wait.P50, rep.Wait.P99, rep.Wait.Max)
	fmt.Fprintf(&b, "  queue frames    gap p50 %.0fms  p99 %.0fms  max %.0fms\n", rep.FrameGap.P50, rep.FrameGap.P99, rep.FrameGap.Max)
	fmt.Fprintf(&b, "  fairness        pre-queue ρ %+.3f, after the start ρ %+.3f, late-vs-early ahead %.1f%%\n", rep.EarlyRho, rep.LateRho, 100*rep.LateAhead)
	if rep.Audit.Passed {
		b.WriteString("audit: PASSED\n")
	} else {
		b.WriteString("audit: FAILED\n")
	}
	for _, c := range rep.Audit.Checks {
		mark := "ok  "
		if slices.Contains(rep.Audit.Failures, c) {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %s\n", mark, c)
	}
	return b.String()
}
