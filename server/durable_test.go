package server_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/system/servertest/topology"
)

// TestDurableAccepts: with redis_wait_replicas=1 on a Sentinel set, a buy
// is answered once the replica has it; with the replica gone, the buy is
// answered 503 unavailable with Retry-After (the master decided it, but
// it is not durable), and so is its retry, until the replica is back.
func TestDurableAccepts(t *testing.T) {
	set, err := topology.StartSentinelSet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Stop)
	st := newStack(t, "SECKILL_REDIS_SENTINELS="+set.SentinelAddrs(), "SECKILL_REDIS_MASTER="+set.Name,
		"SECKILL_REDIS_WAIT_REPLICAS=1", "SECKILL_REDIS_WAIT_TIMEOUT=200ms")
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 5})
	tok := bearer(servertest.Token(t, "durable"))
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "durable-01"), tok); r.Status != 200 {
		t.Fatalf("buy with the replica in sync: %v", r)
	}
	part := inventory.First(sale.ID)
	if err := st.Inventory.Durable(context.Background(), part); err != nil {
		t.Errorf("fence with the replica in sync: %v", err)
	}

	set.Nodes[1].Kill() // the replica
	for _, rid := range []string{"durable-02", "durable-02"} {
		r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, rid), tok)
		if r.Status != 503 || r.code() != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("buy without a replica: %v", r)
		}
	}
	if err := st.Inventory.Durable(context.Background(), part); err == nil {
		t.Error("fence without a replica succeeded")
	}
}
