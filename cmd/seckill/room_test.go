package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/system/servertest"
)

// admission is one queue frame as a watcher got it.
type admission struct {
	at      time.Time
	through int64
}

// watchQueue follows a sale's queue frames on one server until ctx ends.
func watchQueue(ctx context.Context, t *testing.T, addr string, sale int64, got func(admission)) {
	c, _, err := websocket.DefaultDialer.DialContext(ctx, fmt.Sprintf("ws://%s/ws/sales/%d", addr, sale), nil)
	if err != nil {
		t.Errorf("watching on %s: %v", addr, err)
		return
	}
	go func() { <-ctx.Done(); c.Close() }()
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return // the process died, or the test is over
		}
		var f struct {
			Type            string    `json:"type"`
			AdmittedThrough int64     `json:"admitted_through"`
			At              time.Time `json:"at"`
		}
		if json.Unmarshal(data, &f) == nil && f.Type == "queue" {
			got(admission{f.At, f.AdmittedThrough})
		}
	}
}

// rate is the admissions a second between the frames at from and to.
func rate(frames []admission, from, to time.Time) (float64, int) {
	var a, b *admission
	n := 0
	for i := range frames {
		f := &frames[i]
		if f.at.Before(from) || f.at.After(to) {
			continue
		}
		if a == nil {
			a = f
		}
		b = f
		n++
	}
	if a == nil || b == a {
		return 0, n
	}
	return float64(b.through-a.through) / b.at.Sub(a.at).Seconds(), n
}

// TestWaitingRoomRateAcrossProcesses: two `seckill serve` processes share
// a waiting room of 4,000 that admits 100 a second, each with a watcher;
// one of them is killed -9 halfway. Over the 30 s run, and in each
// 7.5 s stretch of it before and after the kill, the room admits within
// ±10% of the rate: two processes admit no faster than one, and the death
// of one does not stall it.
func TestWaitingRoomRateAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s run")
	}
	bin := servertest.Binary(t)
	env := servertest.New(t)
	servertest.Broker(t, env.Config)
	const admit, crowd, run = 100, 4000, 30 * time.Second
	start := time.Now().Add(3 * time.Second)
	sale := servertest.MustSale(t, env.Server(t, nil), servertest.SaleSpec{Total: crowd, Start: start, End: start.Add(time.Hour),
		WaitingRoom: true, AdmitPerSecond: admit})
	ctx := context.Background()
	for i := range crowd {
		if _, err := env.Inventory.JoinQueue(ctx, sale.ID, fmt.Sprintf("crowd-%04d", i), time.Now(), false); err != nil {
			t.Fatal(err)
		}
	}
	if time.Now().After(start) {
		t.Fatal("the crowd took longer to join than the pre-queue lasts")
	}
	var procs []*bench.Child
	for range 2 {
		c, err := bench.StartServe(ctx, bin, env.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		procs = append(procs, c)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu     sync.Mutex
		frames [2][]admission
		wg     sync.WaitGroup
	)
	for i, p := range procs {
		wg.Go(func() {
			watchQueue(wctx, t, p.Addr, sale.ID, func(a admission) {
				mu.Lock()
				frames[i] = append(frames[i], a)
				mu.Unlock()
			})
		})
	}
	killAt, end := start.Add(run/2), start.Add(run)
	time.Sleep(time.Until(killAt)) // the run's clock, not a synchronisation
	procs[0].Kill()
	time.Sleep(time.Until(end.Add(200 * time.Millisecond)))
	stop()
	wg.Wait()

	survivor := frames[1]
	var report []string
	check := func(name string, from, to time.Time) {
		r, n := rate(survivor, from, to)
		report = append(report, fmt.Sprintf("%s %.1f/s (%d frames)", name, r, n))
		if r < admit*0.9 || r > admit*1.1 {
			t.Errorf("%s: %.1f admissions a second over %d frames, want %d ± 10%%", name, r, n, admit)
		}
	}
	check("whole run", start, end)
	check("0-7.5 s", start, start.Add(run/4))
	check("7.5-15 s (both up)", start.Add(run/4), killAt)
	check("15-22.5 s (one killed)", killAt, killAt.Add(run/4))
	check("22.5-30 s", killAt.Add(run/4), end)
	r0, _ := rate(frames[0], start, killAt)
	report = append(report, fmt.Sprintf("the killed process's watcher before the kill %.1f/s", r0))
	if r0 < admit*0.9 || r0 > admit*1.1 {
		t.Errorf("the killed process's watcher saw %.1f a second before the kill, want %d ± 10%%", r0, admit)
	}
	t.Logf("admission at %d a second, two serve processes, one killed -9 at 15 s: %s", admit, strings.Join(report, "; "))
}
