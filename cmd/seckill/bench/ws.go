package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/wait"
)

// wsCase measures live-stock fan-out: N WebSocket clients on one server
// process (a real `seckill serve` child, so its memory is its own) watch
// one sale; after each stock change, how long until each client has it,
// and the server's memory per connection. The baseline is a small crowd
// measured the same way in the same run.
func wsCase(ctx context.Context, e *Env, o Options) (Table, error) {
	raiseFileLimit()
	base := min(100, o.WSClients)
	srv, err := e.server(e.Config, nil)
	if err != nil {
		return Table{}, err
	}
	sale, err := e.sale(ctx, srv, 1_000_000, 1_000_000, 100)
	if err != nil {
		return Table{}, err
	}
	cfg := e.Config
	cfg.HTTP.WSMaxPerIP, cfg.HTTP.WSMaxTotal = 0, 0 // a crowd from one machine
	child, err := StartServe(ctx, o.Binary, cfg)
	if err != nil {
		return Table{}, err
	}
	defer child.Stop()

	var rows [][]string
	var results []fanout
	for _, n := range []int{base, o.WSClients} {
		r, err := measureFanout(ctx, e, child, sale.ID, n, 5)
		if err != nil {
			return Table{}, fmt.Errorf("%d clients: %w", n, err)
		}
		results = append(results, r)
		rows = append(rows, []string{
			fmt.Sprint(n), fmt.Sprint(r.connected), ms(r.p50), ms(r.p99), ms(r.max),
			fmt.Sprintf("%.1f", r.bytesPerConn/1024), f2(ratio(float64(r.p99), float64(results[0].p99))), ms(r.cpuPerChange),
		})
	}
	big := results[len(results)-1]
	return Table{
		Title:  fmt.Sprintf("WebSocket fan-out: one server process, one sale, up to %d watchers", o.WSClients),
		Header: []string{"clients", "connected", "p50 ms", "p99 ms", "max ms", "server KiB/conn", "p99 × small crowd", "server CPU ms per change"},
		Rows:   rows,
		Goals: []Goal{
			{What: fmt.Sprintf("%d clients connected and served every update", o.WSClients), Got: float64(big.served), Want: float64(o.WSClients)},
		},
		Notes: []string{
			fmt.Sprintf("latency = stock change in Redis → frame read by the client, over 5 changes; includes the hub's poll interval (ws_poll %s)", e.Config.HTTP.WSPoll),
			"server memory = growth of the `seckill serve` process's resident set while the clients connected, divided by the clients; server CPU per change = the process's CPU from a stock change until every client had its frame (one broadcast, the clients idle otherwise)",
			"the clients dial from 127.0.0.1 to 127.0.0.8 in turn (one source address has about 28,000 ports to one server port); the connection caps are off",
		},
	}, nil
}

type fanout struct {
	connected, served int
	p50, p99, max     time.Duration
	bytesPerConn      float64
	cpuPerChange      time.Duration // the server's CPU from a change until every client had it
}

// measureFanout connects n clients, then makes `changes` stock changes one
// after another and records, per change, when each client saw it.
func measureFanout(ctx context.Context, e *Env, child *Child, sale int64, n, changes int) (fanout, error) {
	rss0 := child.RSS()
	// client is one watcher: when it read each remaining value.
	type client struct {
		mu   sync.Mutex
		seen map[int64]time.Time
	}
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = &client{seen: map[int64]time.Time{}}
	}
	crowd, err := watch(ctx, child.Addr, sale, n, func(i int, at time.Time, remaining int64) {
		cl := clients[i]
		cl.mu.Lock()
		if _, ok := cl.seen[remaining]; !ok {
			cl.seen[remaining] = at
		}
		cl.mu.Unlock()
	})
	if err != nil {
		return fanout{}, err
	}
	defer crowd.close()
	seen := func(i int, remaining int64) (time.Time, bool) {
		cl := clients[i]
		cl.mu.Lock()
		defer cl.mu.Unlock()
		at, ok := cl.seen[remaining]
		return at, ok
	}
	// Everyone has the first frame before the clock starts.
	st, err := e.Inv.Stock(ctx, sale)
	if err != nil {
		return fanout{}, err
	}
	if err := waitAll(ctx, n, func(i int) bool { _, ok := seen(i, st.Available); return ok }, 30*time.Second); err != nil {
		return fanout{}, fmt.Errorf("initial frame: %w", err)
	}
	rss1 := child.RSS()

	var lat []time.Duration
	served := n
	remaining := st.Available
	cpu := child.CPU()
	for k := range changes {
		start := time.Now()
		d, err := e.Inv.Reserve(ctx, sale, []seckill.Buy{{
			UserID: fmt.Sprintf("ws-%d-%d", n, k), Qty: 1, RequestID: fmt.Sprintf("ws-bench-%d-%d", n, k), OrderID: seckill.NewOrderID(sale),
		}})
		if err != nil || d.Answers[0].Code != seckill.CodeOK {
			return fanout{}, fmt.Errorf("stock change: %v %v", err, d)
		}
		remaining--
		if err := waitAll(ctx, n, func(i int) bool { _, ok := seen(i, remaining); return ok }, 30*time.Second); err != nil {
			served = 0
		}
		for i := range n {
			if at, ok := seen(i, remaining); ok {
				lat = append(lat, at.Sub(start))
			}
		}
	}
	cpu = child.CPU() - cpu
	crowd.close()
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return fanout{
		connected: n, served: served, p50: pct(0.5), p99: pct(0.99), max: pct(1),
		bytesPerConn: float64(rss1-rss0) / float64(n), cpuPerChange: cpu / time.Duration(changes),
	}, nil
}

// crowd is n live-stock clients of one sale, each read by a goroutine.
type crowd struct {
	conns   []*websocket.Conn
	readers sync.WaitGroup
}

// watch connects n clients to sale's live stock on the server at addr,
// 64 at a time from the loopback addresses in turn, and hands each stock
// frame a client reads to frame (its index, when, the units remaining),
// until close.
func watch(ctx context.Context, addr string, sale int64, n int, frame func(i int, at time.Time, remaining int64)) (*crowd, error) {
	url := fmt.Sprintf("ws://%s/ws/sales/%d", addr, sale)
	dialer := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 512, WriteBufferSize: 256,
		NetDialContext: loopbackDialer()}
	c := &crowd{conns: make([]*websocket.Conn, n)}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range c.conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conn, _, err := dialer.DialContext(ctx, url, nil)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			c.conns[i] = conn
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		c.close()
		return nil, fmt.Errorf("%d of %d connections failed, first: %v", failed.Load(), n, firstErr.Load())
	}
	for i, conn := range c.conns {
		c.readers.Go(func() {
			// A cheap reader, so that the crowd in this process leaves the
			// server as much of the machine as it can: one buffer per
			// client, the number read straight out of the frame.
			buf := make([]byte, 1024)
			for {
				_, r, err := conn.NextReader()
				if err != nil {
					return
				}
				n, err := io.ReadFull(r, buf)
				if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
					return
				}
				at := time.Now()
				if remaining, ok := stockRemaining(buf[:n]); ok {
					frame(i, at, remaining)
				}
			}
		})
	}
	return c, nil
}

// stockRemaining reads "remaining" out of a stock frame (API.md, Live
// stock: {"type":"stock",…,"remaining":N,…}); ok is false for another
// frame.
func stockRemaining(frame []byte) (int64, bool) {
	if !bytes.HasPrefix(frame, []byte(`{"type":"stock",`)) {
		return 0, false
	}
	_, rest, ok := bytes.Cut(frame, []byte(`"remaining":`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
}

// close closes every client and waits for the readers.
func (c *crowd) close() {
	for _, conn := range c.conns {
		if conn != nil {
			conn.Close()
		}
	}
	c.readers.Wait()
}

// waitAll polls ok for every client index until all pass or limit ends.
func waitAll(ctx context.Context, n int, ok func(int) bool, limit time.Duration) error {
	i := 0
	return wait.Until(ctx, limit, time.Millisecond, func() (bool, string, error) {
		for i < n && ok(i) {
			i++
		}
		return i == n, fmt.Sprintf("client %d of %d waiting", i, n), nil
	})
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// raiseFileLimit lifts the open-files limit to 200,000 where the process
// may (root), else the soft limit to the hard one: tens of thousands of
// sockets need it, here and in the child that inherits it.
func raiseFileLimit() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return
	}
	want := syscall.Rlimit{Cur: max(rl.Max, 200_000), Max: max(rl.Max, 200_000)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

// loopbackDialer dials from 127.0.0.1 to 127.0.0.8 in turn: one source
// address has about 28,000 ephemeral ports to one server port, fewer
// than the watchers of a big crowd.
func loopbackDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var n atomic.Uint32
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ip := net.IPv4(127, 0, 0, byte(1+n.Add(1)%8))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, network, addr)
	}
}
