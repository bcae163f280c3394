package rdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/rdb"
)

// open connects to the Redis the suite runs on (scripts/services.sh
// starts it), with keys under a prefix of this test's own.
func open(t *testing.T) (rdb.Client, rdb.Keys) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rdb.Open(ctx, rdb.Options{Addrs: []string{"127.0.0.1:6379"}, PoolSize: 4})
	if err != nil {
		t.Fatalf("%v.\nStart Redis on 127.0.0.1:6379 (scripts/services.sh starts every service the tests need).", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rdb.NewKeys("rdbtest" + time.Now().Format("150405.000000000"))
}

// Every key of a part carries the part's hash tag, so one script touching
// them stays in one Cluster slot.
func TestPartKeysShareTheTag(t *testing.T) {
	k := rdb.NewKeys("sk")
	for _, key := range k.Part("7.3").All() {
		if !strings.HasPrefix(key, "sk:{7.3}:") {
			t.Errorf("key %q does not carry the part's tag", key)
		}
	}
	for _, key := range []string{k.Outcomes(7), k.Capped(7), k.Challenge(7, "u"), k.Queue(7), k.Room(7), k.Turn("x", 7)} {
		if !strings.HasPrefix(key, "sk:{7}:") {
			t.Errorf("sale-wide key %q does not carry the sale's tag", key)
		}
	}
}

// A write the replicas did not confirm is ErrNotDurable, and transient:
// the caller answers "try again", never "done".
func TestReplicasNotConfirmed(t *testing.T) {
	c, k := open(t)
	ctx := context.Background()
	key := k.Part("1").Fence()
	t.Cleanup(func() { c.Del(ctx, key) })
	script := redis.NewScript(`return redis.call('INCR', KEYS[1])`)

	// Waiting for none answers at once.
	if err := (rdb.Replicas{}).Fence(ctx, c, key); err != nil {
		t.Fatalf("fence without replicas: %v", err)
	}
	if reply, err := (rdb.Replicas{}).Run(ctx, c, script, []string{key}); err != nil || reply.Val() != int64(1) {
		t.Fatalf("run without replicas: %v, %v", reply.Val(), err)
	}

	// The suite's Redis has no replica: a wait for one times out.
	timedOut := 0
	r := rdb.Replicas{N: 1, Timeout: 10 * time.Millisecond, OnTimeout: func() { timedOut++ }}
	if err := r.Fence(ctx, c, key); !errors.Is(err, rdb.ErrNotDurable) || !rdb.Transient(err) {
		t.Fatalf("fence awaiting a missing replica: %v, want a transient ErrNotDurable", err)
	}
	_ = c.ScriptFlush(ctx).Err() // Run must load the script again (NOSCRIPT inside a pipeline)
	reply, err := r.Run(ctx, c, script, []string{key})
	if !errors.Is(err, rdb.ErrNotDurable) {
		t.Fatalf("run awaiting a missing replica: %v, want ErrNotDurable", err)
	}
	if reply.Val() != int64(3) { // the fence's increment, then this one: the write was made
		t.Fatalf("the script's reply is %v, want 3", reply.Val())
	}
	if timedOut != 2 {
		t.Fatalf("OnTimeout told %d times, want 2", timedOut)
	}
}

// Follow hands over what is published, and calls caughtUp first.
func TestFollow(t *testing.T) {
	c, k := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{}, 1)
	got := make(chan string, 1)
	go rdb.Follow(ctx, c, k.StockChanged(), func(context.Context) error { ready <- struct{}{}; return nil },
		func(payload string) { got <- payload })
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow never subscribed")
	}
	if err := c.Publish(ctx, k.StockChanged(), "42").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "42" {
			t.Fatalf("got %q, want 42", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message never arrived")
	}
}

// TestClaimFromADeadRelay: entries read by a relay whose heartbeat lapsed
// are claimed at once, however fresh; those of a relay that beats are
// left to it until they are idle for minIdle.
func TestClaimFromADeadRelay(t *testing.T) {
	c, k := open(t)
	ctx := context.Background()
	o := rdb.NewOutbox(c, k, k.Part("1").Outbox())
	t.Cleanup(func() { c.Del(ctx, k.Part("1").Outbox(), k.Relay("alive"), k.Relay("dead")) })
	for i := range 4 {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: k.Part("1").Outbox(), Values: map[string]any{"n": i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Beat(ctx, c, k, "alive", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Beat(ctx, c, k, "dead", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, relay := range []string{"alive", "dead"} {
		if es, err := o.Read(ctx, relay, rdb.OutboxNew, 2, -1); err != nil || len(es) != 2 {
			t.Fatalf("%s reads %d entries: %v", relay, len(es), err)
		}
	}
	if es, err := o.Claim(ctx, "heir", time.Hour, 10); err != nil || len(es) != 0 {
		t.Fatalf("both relays beat: claimed %d (%v)", len(es), err)
	}
	if err := rdb.Beat(ctx, c, k, "dead", 0); err != nil { // as if its beat lapsed
		t.Fatal(err)
	}
	es, err := o.Claim(ctx, "heir", time.Hour, 10)
	if err != nil || len(es) != 2 || es[0].Values["n"] != "2" || es[1].Values["n"] != "3" {
		t.Fatalf("claimed %v (%v), want the dead relay's two entries", es, err)
	}
}
