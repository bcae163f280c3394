// Package bustest is the behaviour every bus.Bus must show, written once:
// each implementation's tests call Run with a constructor of fresh,
// isolated buses. A difference between two implementations is a failing
// test here.
package bustest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/bus"
)

// Run runs the conformance suite; open returns a new bus with queues of
// its own, removed when the test ends.
func Run(t *testing.T, open func(t *testing.T) bus.Bus) {
	tests := []struct {
		name string
		fn   func(*testing.T, bus.Bus)
	}{
		{"PublishConsumeAck", testPublishConsumeAck},
		{"Requeue", testRequeue},
		{"ClosedSubscriptionGivesBack", testClosedSubscriptionGivesBack},
		{"Prefetch", testPrefetch},
		{"ConsumersShare", testConsumersShare},
		{"DeadLetterAndReplay", testDeadLetterAndReplay},
		{"PublishDelayed", testPublishDelayed},
		{"UnknownQueue", testUnknownQueue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

func msgs(tag string, n int) []bus.Message {
	out := make([]bus.Message, n)
	for i := range out {
		out[i] = bus.Message{ID: fmt.Sprintf("%s-%d", tag, i), Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	return out
}

func publish(t *testing.T, b bus.Bus, queue string, ms ...bus.Message) {
	t.Helper()
	n, err := b.Publish(context.Background(), queue, ms...)
	if err != nil || n != len(ms) {
		t.Fatalf("publish %d to %s: %d confirmed, %v", len(ms), queue, n, err)
	}
}

func subscribe(t *testing.T, b bus.Bus, queue string, prefetch int) bus.Subscription {
	t.Helper()
	s, err := b.Subscribe(context.Background(), queue, prefetch)
	if err != nil {
		t.Fatalf("subscribe %s: %v", queue, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// receive takes the next delivery, failing after a deadline.
func receive(t *testing.T, s bus.Subscription) bus.Delivery {
	t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			t.Fatal("subscription ended")
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	return bus.Delivery{}
}

// none checks that nothing is delivered for a while.
func none(t *testing.T, s bus.Subscription, d time.Duration) {
	t.Helper()
	select {
	case got, ok := <-s.Deliveries():
		if ok {
			t.Fatalf("unexpected delivery %s", got.ID)
		}
	case <-time.After(d):
	}
}

// depth polls Depth until it is want.
func depth(t *testing.T, b bus.Bus, queue string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := b.Depth(context.Background(), queue)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("depth of %s: %d (%v), want %d", queue, n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testPublishConsumeAck(t *testing.T, b bus.Bus) {
	in := msgs("ack", 5)
	in[0].Headers = map[string]string{"k": "v"}
	publish(t, b, bus.Orders, in...)
	depth(t, b, bus.Orders, 5)
	s := subscribe(t, b, bus.Orders, 10)
	for i := range in {
		d := receive(t, s)
		if d.ID != in[i].ID || string(d.Body) != string(in[i].Body) || d.Redelivered {
			t.Fatalf("delivery %d: %s %s redelivered=%v, want %s %s", i, d.ID, d.Body, d.Redelivered, in[i].ID, in[i].Body)
		}
		if i == 0 && d.Headers["k"] != "v" {
			t.Errorf("headers lost: %v", d.Headers)
		}
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	depth(t, b, bus.Orders, 0)
	none(t, subscribe(t, b, bus.Orders, 10), 200*time.Millisecond)
}

func testRequeue(t *testing.T, b bus.Bus) {
	publish(t, b, bus.Timeouts, msgs("requeue", 1)...)
	s := subscribe(t, b, bus.Timeouts, 1)
	d := receive(t, s)
	if err := d.Requeue(); err != nil {
		t.Fatal(err)
	}
	again := receive(t, s)
	if again.ID != d.ID || !again.Redelivered {
		t.Fatalf("after requeue: %s redelivered=%v", again.ID, again.Redelivered)
	}
	if err := again.Ack(); err != nil {
		t.Fatal(err)
	}
}

// testClosedSubscriptionGivesBack: a consumer that dies (its subscription
// closes) with messages in hand gives them back, every time: dying is
// never a reason to dead-letter.
func testClosedSubscriptionGivesBack(t *testing.T, b bus.Bus) {
	in := msgs("crash", 3)
	publish(t, b, bus.Orders, in...)
	for round := range 8 {
		s, err := b.Subscribe(context.Background(), bus.Orders, 10)
		if err != nil {
			t.Fatal(err)
		}
		for range in {
			d := receive(t, s)
			if round > 0 && !d.Redelivered {
				t.Errorf("round %d: %s not marked redelivered", round, d.ID)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := subscribe(t, b, bus.Orders, 10)
	var ids []string
	for range in {
		d := receive(t, s)
		ids = append(ids, d.ID)
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"crash-0", "crash-1", "crash-2"}) {
		t.Errorf("after 8 crashes: %v", ids)
	}
	if n, _ := b.Depth(context.Background(), bus.Dead); n != 0 {
		t.Errorf("%d dead letters after consumers died", n)
	}
}

func testPrefetch(t *testing.T, b bus.Bus) {
	publish(t, b, bus.Orders, msgs("prefetch", 5)...)
	s := subscribe(t, b, bus.Orders, 2)
	first, second := receive(t, s), receive(t, s)
	none(t, s, 300*time.Millisecond)
	if err := first.Ack(); err != nil {
		t.Fatal(err)
	}
	third := receive(t, s)
	none(t, s, 200*time.Millisecond)
	for _, d := range []bus.Delivery{second, third} {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}

func testConsumersShare(t *testing.T, b bus.Bus) {
	const n = 200
	publish(t, b, bus.Orders, msgs("share", n)...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	got := make(chan struct{}, n)
	for range 3 {
		s := subscribe(t, b, bus.Orders, 5)
		wg.Go(func() {
			for d := range s.Deliveries() {
				mu.Lock()
				seen[d.ID]++
				mu.Unlock()
				_ = d.Ack()
				got <- struct{}{}
			}
		})
	}
	for range n {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d delivered", len(seen), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s delivered %d times", id, k)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct of %d", len(seen), n)
	}
}

func testDeadLetterAndReplay(t *testing.T, b bus.Bus) {
	ctx := context.Background()
	publish(t, b, bus.Orders, msgs("dead", 3)...)
	s := subscribe(t, b, bus.Orders, 10)
	for i := range 3 {
		d := receive(t, s)
		if i < 2 {
			if err := d.DeadLetter(fmt.Sprint("reason ", i)); err != nil {
				t.Fatal(err)
			}
		} else if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	depth(t, b, bus.Dead, 2)
	dead, err := b.DeadLetters(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %v, %v", dead, err)
	}
	for i, m := range dead {
		if m.ID != fmt.Sprint("dead-", i) || m.Headers[bus.HeaderReason] != fmt.Sprint("reason ", i) ||
			m.Headers[bus.HeaderQueue] != bus.Orders || string(m.Body) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("dead letter %d: %+v", i, m)
		}
	}
	depth(t, b, bus.Dead, 2) // listing left them there
	n, err := b.Replay(ctx, func(m bus.Message) bool { return m.ID == "dead-1" })
	if err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	depth(t, b, bus.Dead, 1)
	d := receive(t, s)
	if d.ID != "dead-1" || d.Headers[bus.HeaderReason] != "" {
		t.Errorf("replayed: %s %v", d.ID, d.Headers)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if left, _ := b.DeadLetters(ctx, 10); len(left) != 1 || left[0].ID != "dead-0" {
		t.Errorf("left in the dead-letter queue: %+v", left)
	}
}

func testPublishDelayed(t *testing.T, b bus.Bus) {
	const delay = 500 * time.Millisecond
	start := time.Now()
	if err := b.PublishDelayed(context.Background(), bus.Timeouts, bus.Message{ID: "later", Body: []byte(`{}`)}, delay); err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, b, bus.Timeouts, 1)
	d := receive(t, s)
	if waited := time.Since(start); d.ID != "later" || waited < delay {
		t.Errorf("delayed message %s after %s, want after %s", d.ID, waited, delay)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

func testUnknownQueue(t *testing.T, b bus.Bus) {
	if _, err := b.Publish(context.Background(), "nowhere", msgs("x", 1)...); err == nil {
		t.Error("publish to an unknown queue succeeded")
	}
	if _, err := b.Subscribe(context.Background(), "nowhere", 1); err == nil {
		t.Error("subscribe to an unknown queue succeeded")
	}
}
