// Package servertest gives each test its own slice of the real local
// services: a Redis key prefix, a fresh MySQL database with the schema, and
// RabbitMQ names, all removed when the test ends, so the suite can run twice
// in a row on the same services. A service that cannot be reached fails the
// test with how to start it.
package servertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/gorilla/websocket"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest/topology"
)

// JWTSecret signs the session tokens of test servers.
const JWTSecret = "servertest-secret-servertest-secret"

// AdminToken is the admin bearer token of test servers.
const AdminToken = "servertest-admin-token"

// AdminPassword is the admin password of test servers.
const AdminPassword = "servertest-password"

// How to start each service, for failure messages.
const (
	startRedisCmd = `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no`
	startMySQL    = `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`
	startRabbitMQ = `rabbitmq-server -detached`
)

// Env is one test's isolated view of the services.
type Env struct {
	Config    configs.Config
	Redis     redis.UniversalClient
	Keys      rdb.Keys
	Inventory *inventory.Store
	Funds     *funds.Store
	DB        *sqlx.DB
	Ledger    *orders.Store
}

// Config returns a configuration with names of its own (Redis prefix,
// MySQL database, RabbitMQ prefix), every limiter off, and the given
// SECKILL_* overrides ("KEY=value") applied last.
func Config(t testing.TB, overrides ...string) configs.Config {
	t.Helper()
	id := Unique()
	environ := append(os.Environ(),
		"SECKILL_REDIS_PREFIX=t"+id,
		"SECKILL_AMQP_PREFIX=t"+id,
		"SECKILL_MYSQL_DSN="+databaseDSN(t, "seckill_t"+id),
		"SECKILL_JWT_SECRET="+JWTSecret,
		"SECKILL_ADMIN_TOKEN="+AdminToken,
		"SECKILL_ADMIN_PASSWORD="+AdminPassword,
		"SECKILL_RATE_GLOBAL=0", "SECKILL_RATE_PER_USER=0", "SECKILL_RATE_PER_IP=0",
		"SECKILL_HTTP_ADDR=127.0.0.1:0",
	)
	if os.Getenv("SECKILL_TEST_REDIS") == "cluster" {
		environ = append(environ, "SECKILL_REDIS_ADDR="+SharedRedisCluster(t).Addrs(), "SECKILL_REDIS_DB=0")
	}
	cfg, err := configs.Load(append(environ, overrides...))
	if err != nil {
		t.Fatalf("servertest: config: %v", err)
	}
	return cfg
}

// Unique returns a short random name part.
func Unique() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// databaseDSN is the configured (or default) DSN with another database.
func databaseDSN(t testing.TB, db string) string {
	dsn := os.Getenv("SECKILL_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/seckill?parseTime=true"
	}
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("servertest: SECKILL_MYSQL_DSN: %v", err)
	}
	c.DBName = db
	return c.FormatDSN()
}

// New returns an Env with Redis and a migrated MySQL database of its own.
func New(t testing.TB, overrides ...string) *Env {
	t.Helper()
	cfg := Config(t, overrides...)
	e := &Env{Config: cfg, Redis: Redis(t, cfg), DB: MySQL(t, cfg)}
	sys := e.System(prometheus.NewRegistry())
	e.Inventory, e.Funds, e.Ledger = sys.Stock, sys.Funds, sys.Ledger
	e.Keys = e.Inventory.Keys()
	return e
}

// System builds the parts of a process on the env's connections as they
// are now (with no bus), its metrics on registry.
func (e *Env) System(registry *prometheus.Registry) *system.System {
	return system.New(e.Config, system.Conns{Redis: e.Redis, DB: e.DB}, registry)
}

// Redis connects to the configured Redis (a cluster under
// SECKILL_TEST_REDIS=cluster) and deletes the keys under the config's
// prefix when the test ends.
func Redis(t testing.TB, cfg configs.Config) redis.UniversalClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg.Redis.PoolSize = 200
	rdb, err := system.OpenRedis(ctx, cfg)
	if err != nil {
		t.Fatalf("servertest: %v.\nStart it with: %s\nor run scripts/services.sh, which starts every service the tests need.", err, startRedisCmd)
	}
	t.Cleanup(func() {
		bounded(t, "deleting the test's Redis keys", func() error {
			defer rdb.Close()
			return deleteKeys(rdb, cfg.Redis.Prefix+":*")
		})
	})
	return rdb
}

// cleanupWait bounds how long a test's cleanup waits for a service: a
// drop that waits for a lock, or a broker that stops answering, must not
// hang the whole package until its -timeout (what is left behind has
// names of its own, so no later test sees it).
const cleanupWait = 30 * time.Second

// bounded runs a cleanup step, waiting for it at most cleanupWait; past
// that it is logged and left running (its error then goes unreported:
// the test it would log to has ended).
func bounded(t testing.TB, what string, step func() error) {
	done := make(chan error, 1)
	go func() { done <- step() }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("servertest: %s: %v", what, err)
		}
	case <-time.After(cleanupWait):
		t.Logf("servertest: %s took longer than %s; left running", what, cleanupWait)
	}
}

// DeleteKeys removes every key matching pattern, on every master.
func DeleteKeys(t testing.TB, c rdb.Client, pattern string) {
	if err := deleteKeys(c, pattern); err != nil {
		t.Logf("servertest: deleting %s: %v", pattern, err)
	}
}

func deleteKeys(c rdb.Client, pattern string) error {
	return rdb.EachMaster(context.Background(), c, func(ctx context.Context, c *redis.Client) error {
		keys, err := scan(ctx, c, pattern)
		if err != nil {
			return err
		}
		for start := 0; start < len(keys); start += 1000 {
			unlink(ctx, c, keys[start:min(start+1000, len(keys))])
		}
		return nil
	})
}

// Keys lists every key matching pattern, on every master, sorted.
func Keys(t testing.TB, c rdb.Client, pattern string) []string {
	t.Helper()
	var mu sync.Mutex
	var all []string
	err := rdb.EachMaster(context.Background(), c, func(ctx context.Context, c *redis.Client) error {
		keys, err := scan(ctx, c, pattern)
		mu.Lock()
		all = append(all, keys...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("servertest: listing %s: %v", pattern, err)
	}
	sort.Strings(all)
	return all
}

func scan(ctx context.Context, c *redis.Client, pattern string) ([]string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// unlink removes keys one by one: on a cluster node they may lie in
// different slots.
func unlink(ctx context.Context, c *redis.Client, keys []string) {
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
}

// MySQL creates the config's database with the schema and drops it when the
// test ends.
func MySQL(t testing.TB, cfg configs.Config) *sqlx.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := orders.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatalf("servertest: MySQL does not answer (%v).\nStart it with: %s\nor run .ci/run, which starts every service the tests need.", err, startMySQL)
	}
	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	name := mustDBName(t, cfg.MySQL.DSN)
	t.Cleanup(func() {
		bounded(t, "dropping database "+name, func() error {
			defer db.Close()
			_, err := db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
			return err
		})
	})
	return db
}

func mustDBName(t testing.TB, dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil || c.DBName == "" || !strings.HasPrefix(c.DBName, "seckill_t") {
		t.Fatalf("servertest: refusing to manage database of DSN %q", dsn)
	}
	return c.DBName
}

// RabbitMQHint is the failure message for an unreachable broker.
func RabbitMQHint(url string, err error) string {
	return fmt.Sprintf("servertest: RabbitMQ at %s does not answer (%v).\nStart it with: %s\nor run .ci/run, which starts every service the tests need.", configs.MaskCredentials(url), err, startRabbitMQ)
}

// Broker returns a RabbitMQ bus for the config's queue names, checks that
// RabbitMQ answers, and deletes the names' queues and exchanges when the
// test ends.
func Broker(t testing.TB, cfg configs.Config) *rabbitmq.Bus {
	t.Helper()
	b := NewBroker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatal(RabbitMQHint(cfg.AMQP.URL, err))
	}
	t.Cleanup(func() {
		bounded(t, "deleting the test's queues", func() error {
			defer b.Close()
			return b.DeleteAll(cfg.Orders.PaymentWindow)
		})
	})
	return b
}

// NewBroker returns a RabbitMQ bus for the config, without checks or
// cleanup (for a second connection, say through a fault-injecting proxy).
func NewBroker(cfg configs.Config) *rabbitmq.Bus {
	return rabbitmq.New(cfg.AMQP.URL, cfg.AMQP.Prefix, cfg.AMQP.QueueType)
}

// Server builds a server on the env's connections, as a process of its
// own, deciding buys with reserver (nil: the configured buy chain).
func (e *Env) Server(t testing.TB, reserver server.Reserver) *server.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv, err := e.System(reg).Server(reg, reserver)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	return srv
}

// StartPipeline runs the outbox relays (the sales' and the funds') and
// the consumers on the env's names until the test ends, and returns their
// bus.
func (e *Env) StartPipeline(t testing.TB) *rabbitmq.Bus {
	t.Helper()
	return e.StartPipelineOn(t, e.DB)
}

// StartPipelineOn is StartPipeline with the workers writing to the ledger
// through db (a proxy's, to cut them off from it).
func (e *Env) StartPipelineOn(t testing.TB, db *sqlx.DB) *rabbitmq.Bus {
	t.Helper()
	broker := Broker(t, e.Config)
	sys := system.New(e.Config, system.Conns{Redis: e.Redis, DB: db, Bus: broker}, prometheus.NewRegistry())
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = sys.RunRelays(ctx) })
	wg.Go(func() { _ = sys.RunConsumers(ctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	return broker
}

// HTTP serves h on a loopback port until the test ends.
func HTTP(t testing.TB, h http.Handler) *httptest.Server {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// SaleSpec describes a sale for MustSale; zero fields get defaults
// (100 units, limit 1, started a minute ago, ending in an hour).
type SaleSpec struct {
	Total, Limit, PriceCents int64
	Start, End               time.Time
	Buckets                  int
	RequireTicket            bool
	PowDifficulty            int
	VerifiedOnly             bool
	// A waiting room: its queue opens at QueueOpens (zero: 15 min before
	// the start) and admits AdmitPerSecond (zero: 100).
	WaitingRoom    bool
	QueueOpens     time.Time
	AdmitPerSecond int64
	// Instant is the sale's instant checkout: a buy charges the wallet.
	Instant bool
}

// MustSale creates a sale through srv, as the admin API does.
func MustSale(t testing.TB, srv *server.Server, spec SaleSpec) seckill.Sale {
	t.Helper()
	now := time.Now()
	if spec.Total == 0 {
		spec.Total = 100
	}
	if spec.Limit == 0 {
		spec.Limit = 1
	}
	if spec.Start.IsZero() {
		spec.Start = now.Add(-time.Minute)
	}
	if spec.End.IsZero() {
		spec.End = now.Add(time.Hour)
	}
	v, err := srv.Sales.Create(context.Background(), seckill.Sale{
		Name: "Test sale", Item: "Test item", PriceCents: spec.PriceCents, Total: spec.Total,
		PerUserLimit: spec.Limit, StartsAt: spec.Start.UTC().Truncate(time.Millisecond),
		EndsAt: spec.End.UTC().Truncate(time.Millisecond), Buckets: spec.Buckets,
		RequireTicket: spec.RequireTicket, PowDifficulty: spec.PowDifficulty, VerifiedOnly: spec.VerifiedOnly,
		WaitingRoom: spec.WaitingRoom, QueueOpensAt: spec.QueueOpens.UTC().Truncate(time.Millisecond), AdmitPerSecond: spec.AdmitPerSecond,
		InstantCheckout: spec.Instant,
	}.Input())
	if err != nil {
		t.Fatalf("servertest: create sale: %v", err)
	}
	return v.Sale
}

// FlushOutcomes writes the outcome counts srv holds in memory to Redis
// now, as its chore does every so often, for a test that reads a sale's
// stats.
func FlushOutcomes(t testing.TB, srv *server.Server) {
	t.Helper()
	o, ok := srv.Outcomes.(*sales.Outcomes)
	if !ok {
		t.Fatalf("servertest: the server counts outcomes with %T", srv.Outcomes)
	}
	if err := o.Flush(context.Background()); err != nil {
		t.Fatalf("servertest: flush outcomes: %v", err)
	}
}

// Token mints a session token for user.
func Token(t testing.TB, user string) string {
	t.Helper()
	tok, _, err := sessions.MintToken([]byte(JWTSecret), user, user, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// WaitFor polls cond until it holds, failing the test after d with the
// last state cond reported.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	err := wait.Until(context.Background(), d, 20*time.Millisecond, func() (bool, string, error) {
		ok, state := cond()
		return ok, state, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the seckill command once per test binary and returns its
// path, for tests that run it as a child process.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "seckill")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/seckill/seckill/cmd/seckill").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// SQLite opens a migrated SQLite ledger in a directory of the test's own.
func SQLite(t testing.TB) *sqlx.DB {
	t.Helper()
	ctx := context.Background()
	db, err := orders.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := orders.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// EachLedger runs a test on both ledgers: a MySQL database and a SQLite
// file of its own (same test body, so a difference between the dialects
// is a failing test).
func EachLedger(t *testing.T, fn func(t *testing.T, db *sqlx.DB)) {
	t.Run("mysql", func(t *testing.T) { fn(t, MySQL(t, Config(t))) })
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
}

var (
	sharedMu      sync.Mutex
	sharedCluster *topology.RedisCluster
)

// SharedRedisCluster returns the cluster this test binary shares (started
// on first use, stopped by Main).
func SharedRedisCluster(t testing.TB) *topology.RedisCluster {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedCluster == nil {
		c, err := topology.StartRedisCluster(3)
		if err != nil {
			t.Fatalf("servertest: starting a Redis Cluster: %v", err)
		}
		sharedCluster = c
	}
	return sharedCluster
}

// Main runs a package's tests and then stops the topologies they shared:
// call it from TestMain. A run about to reach its -timeout prints the
// stacks of the goroutines running tests and exits first (see
// dumpRunningTests).
func Main(m interface{ Run() int }) int {
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > time.Minute {
			watchdog := time.AfterFunc(d-20*time.Second, func() { dumpRunningTests(d) })
			defer watchdog.Stop()
		}
	}
	code := m.Run()
	sharedMu.Lock()
	if sharedCluster != nil {
		sharedCluster.Stop()
	}
	sharedMu.Unlock()
	return code
}

// dumpRunningTests prints the stacks of the goroutines running test code
// and exits. Go's own timeout panic names the running tests first and then
// prints every goroutine: a log cut to its tail (as CI shows it) keeps
// only the last, usually a pool's or a consumer's, never the test that
// hung. This, printed 20 s before that panic, is all test code and last.
func dumpRunningTests(timeout time.Duration) {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var b strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		// A test's own goroutine runs under testing.tRunner even when it
		// hangs in a cleanup of this package (no _test.go frame).
		if strings.Contains(g, "_test.go:") || strings.Contains(g, "testing.tRunner(") && !strings.Contains(g, "testing.(*T).Run(") {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	fmt.Fprintf(os.Stderr, "FAIL: servertest: the tests are about to reach -timeout %s; the goroutines in test code:\n\n%s"+
		"FAIL: servertest: stopped before the timeout (the stacks above show what hung)\n", timeout, b.String())
	os.Exit(3)
}

// Output collects what a child process writes to its stdout and stderr
// while the test reads it: os/exec copies into it from goroutines of its
// own, so the buffer is locked (a plain bytes.Buffer read meanwhile is a
// data race).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// DialWS opens the live stock of sale on the server at base (closed when
// the test ends).
func DialWS(t testing.TB, base string, sale int64, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	url := fmt.Sprintf("ws%s/ws/sales/%d", strings.TrimPrefix(base, "http"), sale)
	c, res, err := websocket.DefaultDialer.Dial(url, header)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, res, err
}

// Fund tops user's wallet up by cents from the provider, as a paid
// top-up would, so the user can pay; the ledger gets it through the funds
// pipeline when one runs.
func (e *Env) Fund(t testing.TB, user string, cents int64) {
	t.Helper()
	m := seckill.TopupMovement("fund-"+Unique(), user, cents, time.Now())
	if _, _, err := e.Funds.Move(context.Background(), m); err != nil {
		t.Fatalf("servertest: fund %s: %v", user, err)
	}
}

// StripeMock starts stripe-mock (Stripe's API answered from its spec and
// fixtures; scripts/services.sh installs it) on a loopback port of its
// own until the test ends, and returns its base URL.
func StripeMock(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		if gobin := filepath.Join(os.Getenv("HOME"), "go", "bin", "stripe-mock"); fileExists(gobin) {
			bin = gobin
		} else {
			t.Fatalf("servertest: stripe-mock not found: run scripts/services.sh, or go install github.com/stripe/stripe-mock@v0.203.0")
		}
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("servertest: start stripe-mock: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- strings.TrimSpace(a)
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("servertest: stripe-mock did not say where it listens within 30s")
	}
	return ""
}

// Proxy is an in-process toxiproxy in front of upstream (host:port), for
// cutting a service off (Stop) and bringing it back (Start); it listens
// at its Listen address.
func Proxy(t testing.TB, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
