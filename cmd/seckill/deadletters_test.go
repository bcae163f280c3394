package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/funds"
)

// TestFundsDeadLettersReplayable: a dead letter of the funds queue whose
// movements decode goes back on replay, and list says what it carries; a
// malformed one, or a well-formed body of another queue's, stays.
func TestFundsDeadLettersReplayable(t *testing.T) {
	m := seckill.CreditMovement("dora", "r1", 500, time.Now())
	s, err := funds.EncodeMovement(m)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal([]string{s})
	dead := func(queue string, body []byte) bus.Message {
		return bus.Message{ID: "m", Body: body, Headers: map[string]string{bus.HeaderQueue: queue, bus.HeaderReason: "why"}}
	}
	if msg := dead(bus.Funds, good); !replayable(msg) || !strings.Contains(carries(msg), "1 movements (first "+m.ID+")") {
		t.Errorf("a well-formed funds dead letter: replayable %v, carries %q", replayable(msg), carries(msg))
	}
	for _, msg := range []bus.Message{
		dead(bus.Funds, []byte(`["not|a movement"]`)), dead(bus.Funds, []byte(`{"e":"x"}`)), dead(bus.Orders, good),
	} {
		if replayable(msg) || carries(msg) != "-" {
			t.Errorf("%s of %s: replayable %v, carries %q", msg.Body, msg.Headers[bus.HeaderQueue], replayable(msg), carries(msg))
		}
	}
}
