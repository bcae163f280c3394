package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/system/servertest/topology"
	"github.com/seckill/seckill/worker"
)

// The instant checkout's fault run: an instant-checkout sale of
// instantUnits on a Redis Cluster, rushed by instantBuyers whose wallets
// hold a random amount (more than two in five too little for what they
// ask), each with one buy request. The sale sells out some 85% of the way
// through the burst, so the faults land while it still sells.
const (
	instantUnits  = 2000
	instantLimit  = 2
	instantPrice  = 1000
	instantBuyers = 3000
	// The buyers arrive in instantWaves crowds over instantBurst: long
	// enough for the three faults to strike one after another while buys
	// go on, and crowded enough that many buys are between their hold and
	// their post at any moment of a wave.
	instantBurst = 12 * time.Second
	instantWaves = 24
	// instantAsk is how long a client keeps retrying one request (503s,
	// lost connections) before it gives up for now: a failover of a
	// Redis master takes a few seconds.
	instantAsk = 25 * time.Second
)

// instantAnswer is what a buy request was answered, once it was not a
// 503 or a lost connection (those are retried).
type instantAnswer struct {
	Status int
	// Code is a refusal's error code.
	Code string
	// OrderID, Pay and ChargeID are an accepted buy's order, its status
	// and its charge.
	OrderID, Pay, ChargeID string
	// Late is true for the answer to the request asked again after the
	// burst, as a client that never heard back asks.
	Late bool
}

func (a instantAnswer) String() string {
	late := ""
	if a.Late {
		late = " (late)"
	}
	if a.Status == http.StatusOK {
		return fmt.Sprintf("200 %s %s %s%s", a.OrderID, a.Pay, a.ChargeID, late)
	}
	return fmt.Sprintf("%d %s%s", a.Status, a.Code, late)
}

// instantBuyer is one shopper: its wallet's funding, its one buy request
// (sent twice at once when twice is set) and every answer it got.
type instantBuyer struct {
	id, token, request string
	funded, qty        int64
	twice              bool
	// quits: a lost connection makes this buyer give up until after the
	// burst (a closed tab), leaving a buy the kill cut to the worker's
	// recovery alone.
	quits bool

	mu      sync.Mutex
	answers []instantAnswer
	// unanswered counts the asks that gave up, every try a 503 or a lost
	// connection; abandoned, the asks a quitter gave up on a lost one.
	unanswered, abandoned int
}

func (b *instantBuyer) amount() int64 { return b.qty * instantPrice }

// instantClient is the buyers' HTTP client: many connections kept to
// each server, a request cut off after 10 s (a server stuck on a dead
// master is retried like one that died).
var instantClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// buyOnce sends b's request once to base; status 0 means no answer.
func (b *instantBuyer) buyOnce(base string, sale int64) instantAnswer {
	body, _ := json.Marshal(map[string]any{"qty": b.qty, "request_id": b.request})
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/sales/%d/buy", base, sale), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.token)
	res, err := instantClient.Do(req)
	if err != nil {
		return instantAnswer{}
	}
	defer res.Body.Close()
	var got struct {
		OrderID  string `json:"order_id"`
		Status   string `json:"status"`
		ChargeID string `json:"charge_id"`
		Error    struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil && res.StatusCode == http.StatusOK {
		return instantAnswer{} // cut off mid-answer: as good as none
	}
	return instantAnswer{Status: res.StatusCode, Code: got.Error.Code, OrderID: got.OrderID, Pay: got.Status, ChargeID: got.ChargeID}
}

// ask sends b's request until it is answered other than 503 or a lost
// connection, as docs/api.md asks of a client: the same request id, 100 ms
// apart, alternating between the servers (urls gives the one to try),
// for instantAsk at most. It keeps the answer. During the burst (not
// late) a quitter gives up on a lost connection.
func (b *instantBuyer) ask(sale int64, urls func(try int) string, late bool) {
	end := time.Now().Add(instantAsk)
	for try := 0; time.Now().Before(end); try++ {
		a := b.buyOnce(urls(try), sale)
		if a.Status == 0 && b.quits && !late {
			b.mu.Lock()
			b.abandoned++
			b.mu.Unlock()
			return
		}
		if a.Status != 0 && a.Status != http.StatusServiceUnavailable {
			a.Late = late
			b.mu.Lock()
			b.answers = append(b.answers, a)
			b.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mu.Lock()
	b.unanswered++
	b.mu.Unlock()
}

// instantServe is one `seckill serve` slot: the process in it now, killed
// and replaced during the run.
type instantServe struct {
	mu    sync.Mutex
	child *bench.Child
	url   string
}

func (s *instantServe) base() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

func (s *instantServe) set(c *bench.Child) {
	s.mu.Lock()
	s.child, s.url = c, "http://"+c.Addr
	s.mu.Unlock()
}

// startInstantWorker runs `seckill worker` until it is killed or the test
// ends, what it logs going to out.
func startInstantWorker(t *testing.T, bin string, cfg configs.Config, env []string, out io.Writer) (*exec.Cmd, error) {
	t.Helper()
	cmd := exec.Command(bin, "worker")
	cmd.Env = processEnv(cfg, env)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // an error once it was killed
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("seckill worker did not stop within 30 s of SIGTERM")
		}
	})
	return cmd, nil
}

// TestInstantCheckoutSurvivesKills: an instant-checkout sale (2,000
// units, 2 a buyer, 10.00 each, the operator's) on a 3-master Redis
// Cluster with redis_wait_replicas=1 and 3 s holds, behind 2 `seckill
// serve` and 1 `seckill worker`. 3,000 buyers with random balances (more
// than two in five short of what they ask) arrive in 24 crowds over 12 s, each
// with one request, every third sending it twice at once, retrying 503s
// and lost connections with the same request id; half of them give up on
// a lost connection until the burst is over. Mid-burst, one after
// another: a `serve` is killed with SIGKILL while the replica of the
// sale's master stalls, so that buys are cut between hold and stock step
// and between stock step and post, and started again; the worker is
// killed with orders on their way to the ledger and started again; the
// master holding the platform's account (every charge's other side) and
// a third of the wallets fails over to a replica a second behind. After
// the burst, once the worker has settled every hold, every request is
// asked once more, as a client that never heard back does; once the
// pipeline has drained again:
//
//   - a request answered 200 is always answered 200 with the same order,
//     paid with its charge ch.<order>; 402 only for a wallet short of
//     price × qty, sold_out and hold_expired the only other refusals,
//     and a funded request's refusal never changes;
//   - every order answered 200 is in the ledger, paid, with exactly one
//     charge of price × qty from its buyer's wallet, and the ledger holds
//     no other order and no other charge of the sale;
//   - every wallet, in Redis and in the ledger, holds its funding less
//     its order's charge, never below 0, nothing held; no hold is
//     pending; the platform's account holds every charge;
//   - the units sold, in Redis and in the ledger, are the units of the
//     orders answered 200, at most the sale's total;
//   - Redis and the funds ledger reconcile to the cent.
func TestInstantCheckoutSurvivesKills(t *testing.T) {
	began := time.Now()
	since := func() string { return time.Since(began).Round(100 * time.Millisecond).String() }
	bin := servertest.Binary(t)
	cluster, err := topology.StartRedisCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	on := []string{"SECKILL_REDIS_ADDR=" + cluster.Addrs(), "SECKILL_REDIS_DB=0",
		"SECKILL_REDIS_WAIT_REPLICAS=1", "SECKILL_REDIS_WAIT_TIMEOUT=200ms",
		// Holds lapse within the run, so the sweep settles those the kills left.
		"SECKILL_HOLD_TTL=3s",
		// The killed server's outbox entries are claimed by the other soon.
		"SECKILL_RELAY_CLAIM_IDLE=2s"}
	env := servertest.New(t, on...)
	broker := servertest.Broker(t, env.Config) // removes the queues at the end
	ctx := context.Background()
	// The servers log errors only: a failover's 503s are expected, and
	// thousands of warnings would bury the test's own lines.
	serveEnv := append(append([]string{}, on...), "SECKILL_LOG_LEVEL=error")

	serves := make([]*instantServe, 2)
	for i := range serves {
		c, err := bench.Start(ctx, bin, env.Config, serveEnv, "serve")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		serves[i] = &instantServe{}
		serves[i].set(c)
	}
	var workerLog servertest.Output
	workerCmd, err := startInstantWorker(t, bin, env.Config, on, &workerLog)
	if err != nil {
		t.Fatal(err)
	}

	var sale struct {
		ID int64 `json:"id"`
	}
	now := time.Now().UTC()
	if status := post(t, serves[0].base(), "/admin/api/sales", servertest.AdminToken, map[string]any{
		"name": "Instant under faults", "item": "Thing", "price_cents": instantPrice, "total": instantUnits,
		"per_user_limit": instantLimit, "instant_checkout": true,
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}, &sale); status != http.StatusCreated {
		t.Fatalf("create sale: %d", status)
	}

	// The buyers, funded up front (a top-up each, straight into Redis; the
	// funds pipeline carries it to the ledger). A wallet holds 0 to 34.99:
	// two in seven of the single-unit buyers and four in seven of the
	// two-unit ones are short, and the others ask about 2,350 units, so the
	// sale sells out some 85% of the way through the burst, well after the
	// faults.
	rng := rand.New(rand.NewPCG(11, 2026))
	buyers := make([]*instantBuyer, instantBuyers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range buyers {
		id := fmt.Sprintf("u_ik%04d", i)
		b := &instantBuyer{id: id, token: servertest.Token(t, id), request: "ik-req-" + id,
			funded: rng.Int64N(7 * instantPrice / 2), qty: 1 + rng.Int64N(instantLimit), twice: i%3 == 0, quits: i/2%2 == 0}
		buyers[i] = b
		if b.funded == 0 {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			env.Fund(t, b.id, b.funded)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The master that fails over: the one of the platform's account (the
	// sale is the operator's: every charge credits it), so both sides of
	// the charges lose what the lagging replica missed, unless it is the
	// sale's master; then another one. Either way it holds the wallets of
	// about a third of the buyers, and the stock stays up.
	keys := rdb.NewKeys(env.Config.Redis.Prefix)
	masterOfKey := func(key string) string {
		m, err := env.Redis.(*redis.ClusterClient).MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	masterOfGroup := func(g int) string { return masterOfKey(keys.Funds(g).Balances()) }
	saleMaster := masterOfKey(keys.Part(inventory.First(sale.ID).Tag).Stock())
	platformMaster := masterOfGroup(env.Funds.Group(seckill.PlatformAccount))
	walletMaster := platformMaster
	masterOf := map[int]string{}
	onVictim := 0
	for _, b := range buyers {
		g := env.Funds.Group(seckill.WalletOf(b.id))
		if _, ok := masterOf[g]; !ok {
			masterOf[g] = masterOfGroup(g)
		}
		if walletMaster == saleMaster && masterOf[g] != saleMaster {
			walletMaster = masterOf[g]
		}
	}
	for _, b := range buyers {
		if masterOf[env.Funds.Group(seckill.WalletOf(b.id))] == walletMaster {
			onVictim++
		}
	}
	t.Logf("%s: ready; sale %d on %s, the platform's account on %s; %s, holding %d buyers' wallets, fails over",
		since(), sale.ID, saleMaster, platformMaster, walletMaster, onVictim)

	// The burst: the buyers arrive in instantWaves crowds, the first one
	// 100 ms from now, one every instantBurst/instantWaves.
	start := time.Now().Add(100 * time.Millisecond)
	waveAt := func(k int) time.Time { return start.Add(time.Duration(k) * instantBurst / instantWaves) }

	// The faults, one after another while the burst goes on, each as a
	// crowd arrives.
	var answered atomic.Int64 // buyers whose first ask has ended
	var struck time.Time      // when the last fault began, once faultsDone
	var soldOut atomic.Int64  // when the first sold_out was answered, in Unix ns
	faultsDone := make(chan []string, 1)
	go func() {
		var log []string
		// step strikes lead before crowd k arrives.
		step := func(k int, lead time.Duration, name string, fault func() string) {
			time.Sleep(time.Until(waveAt(k).Add(-lead))) // the moment of the fault, part of the scenario
			at, when := answered.Load(), since()
			struck = time.Now()
			what := fault()
			log = append(log, fmt.Sprintf("%s at %s, %d of %d buyers answered: %s", name, when, at, instantBuyers, what))
		}
		// A serve is killed 200 ms into a crowd's arrival, the replica of
		// the sale's master stalled (paused from just before the crowd):
		// every stock step waits out its WAIT (200 ms) and answers 503, so
		// the crowd's buys hold their money and queue in the batcher behind
		// the call in flight. The kill cuts those between their hold and
		// their stock step, and the call in flight (decided on the master)
		// between the stock step and the post.
		step(3, 20*time.Millisecond, "serve killed", func() string {
			s := serves[0]
			s.mu.Lock()
			old := s.child
			s.mu.Unlock()
			stalled, err := cluster.ReplicaOf(saleMaster)
			if err != nil {
				t.Error(err)
				return "nothing"
			}
			stalled.Pause()
			time.Sleep(time.Until(waveAt(3).Add(200 * time.Millisecond))) // the stall, part of the scenario
			old.Kill()
			stalled.Resume()
			// The holds pending now: the killed server's buys cut after
			// their hold, and the other's finishing.
			due, derr := env.Funds.DueHolds(ctx, time.Now().Add(time.Hour), 1000)
			if derr != nil {
				t.Error(derr)
			}
			c, err := bench.Start(ctx, bin, env.Config, serveEnv, "serve")
			if err != nil {
				t.Error(err)
				return "not restarted"
			}
			t.Cleanup(c.Stop)
			s.set(c)
			return fmt.Sprintf("%d holds pending just after; restarted in %s", len(due), c.Ready.Round(time.Millisecond))
		})
		// The worker is killed once orders are on their way to the ledger
		// (accepted in Redis, not in the ledger yet), 3 s at most after a
		// crowd arrived.
		step(5, 0, "worker killed", func() string {
			var unwritten int64
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && unwritten < 20; {
				st, err1 := env.Inventory.Stock(ctx, sale.ID)
				totals, err2 := env.Ledger.Totals(ctx, sale.ID)
				if err1 == nil && err2 == nil {
					unwritten = st.Sold - totals.Sold()
				}
			}
			_ = workerCmd.Process.Kill()
			again, err := startInstantWorker(t, bin, env.Config, on, &workerLog)
			if err != nil {
				t.Error(err)
				return "not restarted"
			}
			workerCmd = again
			return fmt.Sprintf("%d units accepted and not in the ledger yet; restarted", unwritten)
		})
		step(7, 0, "wallet master failed over", func() string {
			replica, err := cluster.ReplicaOf(walletMaster)
			if err != nil {
				t.Error(err)
				return "nothing"
			}
			return laggingFailover(t, cluster.Node(walletMaster), replica)
		})
		faultsDone <- log
	}()

	urls := func(first int) func(int) string {
		return func(try int) string { return serves[(first+try)%len(serves)].base() }
	}
	for i, b := range buyers {
		time.Sleep(time.Until(waveAt(i * instantWaves / instantBuyers)))
		wg.Go(func() {
			if b.twice { // the same request again at once, through the other server
				wg.Go(func() { b.ask(sale.ID, urls(i+1), false) })
			}
			b.ask(sale.ID, urls(i), false)
			b.mu.Lock()
			if n := len(b.answers); n > 0 && b.answers[n-1].Code == string(seckill.CodeSoldOut) {
				soldOut.CompareAndSwap(0, time.Now().UnixNano())
			}
			b.mu.Unlock()
			answered.Add(1)
		})
	}
	wg.Wait()
	t.Logf("%s: burst over", since())
	faults := <-faultsDone
	for _, f := range faults {
		t.Log(f)
	}
	if len(faults) < 3 {
		t.Fatalf("only %d faults struck", len(faults))
	}
	// The faults must strike a sale still selling (holds made, posted and
	// voided), not one whose buys the sold-out fast path answers.
	if at := time.Unix(0, soldOut.Load()); soldOut.Load() == 0 || at.Before(struck) {
		t.Errorf("the sale sold out at %s, the last fault began at %s: it struck a sale sold out",
			at.Sub(began).Round(100*time.Millisecond), struck.Sub(began).Round(100*time.Millisecond))
	} else {
		t.Logf("the sale sold out at %s", at.Sub(began).Round(100*time.Millisecond))
	}
	if err := cluster.WaitHealthy(60 * time.Second); err != nil {
		t.Fatalf("the cluster did not heal: %v", err)
	}
	t.Logf("%s: cluster healthy again", since())

	sys := system.New(env.Config, system.Conns{Redis: env.Redis, DB: env.DB, Bus: broker}, nil)
	fr := worker.NewFundsReconciler(sys.Funds, env.Ledger, broker, nil)
	// settled polls, with the worker running, until no hold is pending,
	// the funds reconcile with nothing on its way, and every order Redis
	// accepted is paid in the ledger. It does not stop the test: what
	// follows says what is wrong.
	settled := func(what string, limit time.Duration) bool {
		t.Helper()
		err := wait.Until(ctx, limit, 100*time.Millisecond, func() (bool, string, error) {
			due, err := env.Funds.DueHolds(ctx, time.Now().Add(time.Hour), 100)
			if err != nil {
				return false, err.Error(), nil
			}
			if len(due) > 0 {
				return false, fmt.Sprintf("%d holds pending, first %s of %s, deadline %s", len(due), due[0].ID, due[0].Order(),
					due[0].Deadline.Format(time.TimeOnly)), nil
			}
			rep, err := fr.Check(ctx)
			if err != nil || rep.InFlight || len(rep.Drift) > 0 {
				return false, fmt.Sprintf("funds: %+v %v", rep, err), nil
			}
			st, err := env.Inventory.Stock(ctx, sale.ID)
			if err != nil {
				return false, err.Error(), nil
			}
			totals, err := env.Ledger.Totals(ctx, sale.ID)
			if err != nil {
				return false, err.Error(), nil
			}
			return totals.Units[seckill.OrderPaid] == st.Sold && totals.Orders[seckill.OrderPending] == 0,
				fmt.Sprintf("Redis sold %d, ledger %+v", st.Sold, totals), nil
		})
		if err != nil {
			t.Errorf("waiting for %s: %v", what, err)
			return false
		}
		t.Logf("%s: %s", since(), what)
		return true
	}
	// A hold lapses 3 s after it is made and the sweep settles it within
	// 2 s more (its margin) and a second (its period): 30 s is plenty.
	limit := 30 * time.Second
	if !settled("every hold settled and the pipeline drained after the burst", limit) {
		limit = 5 * time.Second // what did not settle once will not: the checks below say what it is
	}

	// Every request asked once more, as a client that never heard back
	// (or wants to be sure) does: the answer must be the one it had.
	for i, b := range buyers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b.ask(sale.ID, urls(i), true)
		})
	}
	wg.Wait()
	settled("every hold settled again after the requests were asked again", limit)

	// The answers: one decision per request, whatever the faults.
	accepted := map[string]*instantBuyer{} // order → its buyer
	orderOf := map[*instantBuyer]string{}
	codes := map[string]int{}
	flips := map[string]int{} // refusals of one request that changed, by first → later
	var unanswered int
	for _, b := range buyers {
		if b.unanswered > 0 {
			unanswered++
		}
		if len(b.answers) == 0 {
			t.Errorf("%s: %s never answered other than 503 or a lost connection", b.id, b.request)
			continue
		}
		var ok *instantAnswer
		for i, a := range b.answers {
			codes[fmt.Sprintf("%d %s", a.Status, a.Code)]++
			if a.Status == http.StatusOK && ok == nil {
				ok = &b.answers[i]
			}
		}
		if ok != nil {
			for _, a := range b.answers {
				if a.Status != http.StatusOK || a.OrderID != ok.OrderID {
					t.Errorf("%s: %s accepted and answered otherwise: %v", b.id, b.request, b.answers)
					break
				}
			}
			if ok.Pay != string(seckill.OrderPaid) || ok.ChargeID != seckill.ChargeID(ok.OrderID) {
				t.Errorf("%s: accepted but not born paid: %v", b.id, *ok)
			}
			if b.funded < b.amount() {
				t.Errorf("%s: accepted a buy of %d cents holding %d", b.id, b.amount(), b.funded)
			}
			if prev, dup := accepted[ok.OrderID]; dup {
				t.Errorf("order %s answered to %s and %s", ok.OrderID, prev.id, b.id)
			}
			accepted[ok.OrderID], orderOf[b] = b, ok.OrderID
			continue
		}
		for _, a := range b.answers {
			switch {
			case a.Status == http.StatusPaymentRequired && a.Code == string(seckill.CodeInsufficientFunds):
				if b.funded >= b.amount() {
					t.Errorf("%s: refused for funds holding %d for %d: %v", b.id, b.funded, b.amount(), b.answers)
				}
			case a.Status == http.StatusConflict && (a.Code == string(seckill.CodeSoldOut) || a.Code == string(seckill.CodeHoldExpired)):
			default:
				t.Errorf("%s: unexpected answer %v (all: %v)", b.id, a, b.answers)
			}
		}
		// A short wallet's request is refused for funds (not kept) or, once
		// the sale is known sold out, sold_out (not kept either: no hold, no
		// stock step), in any order. A funded one's refusal is kept for its
		// request id (docs/api.md): a retry gets it again.
		first := b.answers[0]
		for _, a := range b.answers[1:] {
			if a.Code != first.Code && b.funded >= b.amount() {
				flips[first.Code+" → "+a.Code]++
				if flips[first.Code+" → "+a.Code] <= 3 {
					t.Errorf("%s: %s refused twice differently: %v", b.id, b.request, b.answers)
				}
				break
			}
		}
	}
	t.Logf("answers (all asks): %v; %d requests had an ask give up", codes, unanswered)
	if len(flips) > 0 {
		t.Errorf("refusals of one request that changed, by first → later answer: %v", flips)
	}
	// The quitters' buys, cut by the kill and left to the worker: decided
	// only by the consumer, the sweep or their late ask.
	left := map[string]int{}
	for _, b := range buyers {
		if b.abandoned > 0 && len(b.answers) > 0 {
			last := b.answers[len(b.answers)-1]
			left[fmt.Sprintf("%d %s", last.Status, last.Code)]++
		}
	}
	t.Logf("buys given up on a lost connection, by their late answer: %v", left)
	// Those the kill cut between their hold and their stock step lapsed:
	// the sweep barred them (hold_expired) and gave their money back.
	if left["409 hold_expired"] == 0 {
		t.Errorf("no buy given up on a lost connection lapsed: the kill cut none between its hold and its stock step")
	}

	// The ledger: the orders answered 200, paid, each charged once, and
	// nothing else of the sale.
	var rows []struct {
		ID        string `db:"id"`
		UserID    string `db:"user_id"`
		RequestID string `db:"request_id"`
		Qty       int64  `db:"qty"`
		Status    string `db:"status"`
	}
	if err := env.DB.Select(&rows, "SELECT id, user_id, request_id, qty, status FROM orders WHERE sale_id = ?", sale.ID); err != nil {
		t.Fatal(err)
	}
	inLedger := map[string]bool{}
	var ledgerUnits int64
	for _, o := range rows {
		inLedger[o.ID] = true
		b, ok := accepted[o.ID]
		switch {
		case !ok:
			t.Errorf("the ledger holds order %s (%s, %s, %d units, %s) that no answer accepted", o.ID, o.UserID, o.RequestID, o.Qty, o.Status)
		case o.UserID != b.id || o.RequestID != b.request || o.Qty != b.qty:
			t.Errorf("order %s is %s/%s/%d in the ledger, answered to %s/%s/%d", o.ID, o.UserID, o.RequestID, o.Qty, b.id, b.request, b.qty)
		case o.Status != string(seckill.OrderPaid):
			t.Errorf("order %s is %s in the ledger, answered paid", o.ID, o.Status)
		}
		ledgerUnits += o.Qty
	}
	var sold int64
	spent := map[string]int64{} // by buyer, from its order's charge in the ledger
	var mu sync.Mutex           // spent, while the orders are read
	for order, b := range accepted {
		sold += b.qty
		if !inLedger[order] {
			t.Errorf("order %s answered 200 to %s is not in the ledger", order, b.id)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ts, err := env.Ledger.OrderTransfers(ctx, order)
			if err != nil {
				t.Error(err)
				return
			}
			var charges []seckill.Transfer
			for _, tr := range ts {
				if tr.Kind == seckill.TransferCharge {
					charges = append(charges, tr)
				}
			}
			if len(charges) != 1 || charges[0].Amount != b.amount() || charges[0].Debit != seckill.WalletOf(b.id) {
				t.Errorf("order %s of %s (%d cents): charges %+v", order, b.id, b.amount(), charges)
			}
			mu.Lock()
			for _, c := range charges {
				spent[b.id] += c.Amount
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	var charged []struct {
		OrderID string `db:"order_id"`
		N       int    `db:"n"`
	}
	if err := env.DB.Select(&charged, `SELECT order_id, COUNT(*) AS n FROM transfers WHERE kind = 'charge' AND order_id LIKE ? GROUP BY order_id`,
		fmt.Sprintf("%%-%d", sale.ID)); err != nil {
		t.Fatal(err)
	}
	if len(charged) != len(accepted) {
		t.Errorf("the ledger charges %d orders of the sale, %d were accepted", len(charged), len(accepted))
	}
	for _, c := range charged {
		if accepted[c.OrderID] == nil || c.N != 1 {
			t.Errorf("the ledger charges order %s %d times (accepted: %v)", c.OrderID, c.N, accepted[c.OrderID] != nil)
		}
	}
	anomalies, err := env.Ledger.ChargeAnomalies(ctx)
	if err != nil || len(anomalies) > 0 {
		t.Errorf("orders whose charges disagree with their status: %+v %v", anomalies, err)
	}

	// The wallets, in Redis and in the ledger: funding less the charge.
	ledgerBalances, err := env.Ledger.FundsBalances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buyers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w := seckill.WalletOf(b.id)
			want := b.funded - spent[b.id]
			bal, err := env.Funds.Balance(ctx, w)
			if err != nil {
				t.Error(err)
				return
			}
			held, err := env.Funds.Held(ctx, w)
			if err != nil {
				t.Error(err)
				return
			}
			if bal != want || bal < 0 || held != 0 || ledgerBalances[w] != want {
				t.Errorf("%s: Redis holds %d (%d held), the ledger %d; funded %d, charged %d (order %q)",
					b.id, bal, held, ledgerBalances[w], b.funded, spent[b.id], orderOf[b])
			}
		})
	}
	wg.Wait()

	// The other side of the charges: the sale is the operator's, so the
	// platform's account holds every charge, in Redis and in the ledger.
	platform, err := env.Funds.Balance(ctx, seckill.PlatformAccount)
	if err != nil {
		t.Fatal(err)
	}
	if platform != sold*instantPrice || ledgerBalances[seckill.PlatformAccount] != sold*instantPrice {
		t.Errorf("the platform's account holds %d in Redis, %d in the ledger; the charges of the %d units sold make %d",
			platform, ledgerBalances[seckill.PlatformAccount], sold, sold*instantPrice)
	}

	// The units: Redis, the ledger and the answers agree, within the total
	// and the cap.
	st, err := env.Inventory.Stock(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sold != sold || ledgerUnits != sold || sold > instantUnits || st.Sold+st.Available != instantUnits {
		t.Errorf("units: Redis sold %d (%d left), the ledger %d, the answers %d, of %d", st.Sold, st.Available, ledgerUnits, sold, instantUnits)
	}
	units, err := env.Inventory.Buyers(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range buyers {
		want := int64(0)
		if orderOf[b] != "" {
			want = b.qty
		}
		if units[b.id] != want {
			t.Errorf("%s: Redis counts %d units, %d answered", b.id, units[b.id], want)
		}
	}
	rep, err := fr.Check(ctx)
	if err != nil || len(rep.Drift) > 0 || rep.InFlight || rep.RedisSum != 0 || rep.LedgerSum != 0 {
		t.Errorf("funds at the end: %+v %v", rep, err)
	}
	if n := strings.Count(workerLog.String(), "the hold of an accepted order was voided"); n > 0 {
		t.Errorf("the worker found %d accepted orders' holds voided", n)
	}

	// The run must have been what it claims: orders accepted, wallets
	// short, the sale sold out by the end.
	if len(accepted) == 0 || codes["402 insufficient_funds"] == 0 || st.Available >= instantLimit {
		t.Errorf("not the run intended: %d orders, answers %v, %d units left", len(accepted), codes, st.Available)
	}
	if t.Failed() {
		lines := strings.Split(strings.TrimSpace(workerLog.String()), "\n")
		t.Logf("the worker's last lines:\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
	}
	t.Logf("%s: %d buyers, %d orders answered 200 (%d units), %d accounts", since(), instantBuyers, len(accepted), sold, rep.Accounts)
}
