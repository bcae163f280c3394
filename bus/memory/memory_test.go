package memory_test

import (
	"testing"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/bustest"
	"github.com/seckill/seckill/bus/memory"
)

func TestConformance(t *testing.T) {
	bustest.Run(t, func(t *testing.T) bus.Bus {
		b := memory.New()
		t.Cleanup(func() { b.Close() })
		return b
	})
}
