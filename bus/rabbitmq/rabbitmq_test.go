package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/bustest"
	"github.com/seckill/seckill/bus/rabbitmq"
)

func url() string {
	if u := os.Getenv("SECKILL_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// open returns a bus with names of its own on the local RabbitMQ.
func open(t testing.TB, queueType string) bus.Bus {
	t.Helper()
	id := make([]byte, 5)
	_, _ = rand.Read(id)
	b := rabbitmq.New(url(), "t"+hex.EncodeToString(id), queueType)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("RabbitMQ at %s does not answer (%v).\nStart it with: rabbitmq-server -detached\nor run .ci/run, which starts every service the tests need.", url(), err)
	}
	t.Cleanup(func() {
		if err := b.DeleteAll(); err != nil {
			t.Logf("deleting queues: %v", err)
		}
		b.Close()
	})
	return b
}

func TestConformanceClassic(t *testing.T) {
	bustest.Run(t, func(t *testing.T) bus.Bus { return open(t, rabbitmq.Classic) })
}

func TestConformanceQuorum(t *testing.T) {
	bustest.Run(t, func(t *testing.T) bus.Bus { return open(t, rabbitmq.Quorum) })
}
