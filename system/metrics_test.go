package system_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/system/servertest"
)

// TestLabelledCountersStartAtZero: a counter with a label has no series
// until its first event unless each known label value is exported at 0,
// and a dashboard panel over it reads "No data" on a healthy system. A
// fresh process's registry carries every queue of the two labelled
// counters, at 0.
func TestLabelledCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := servertest.New(t).System(reg)
	s.Relay()
	s.OrderConsumer()
	s.TimeoutConsumer()
	s.FundsRelay()
	s.FundsConsumer()
	s.Reconciler()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"seckill_messages_published_total":   {"orders", "timeouts", "funds"},
		"seckill_worker_dead_lettered_total": {"orders", "timeouts", "funds"},
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()]; !ok {
			continue
		}
		got[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if len(labels) != 1 || labels["queue"] == "" {
				t.Errorf("%s has a series labelled %v, want queue only", mf.GetName(), labels)
			}
			got[mf.GetName()][labels["queue"]] = m.GetCounter().GetValue()
		}
	}
	for name, queues := range want {
		if len(got[name]) != len(queues) {
			t.Errorf("%s exports queues %v, want %v", name, got[name], queues)
		}
		for _, q := range queues {
			v, ok := got[name][q]
			if !ok || v != 0 {
				t.Errorf("%s{queue=%q}: exported %v, value %v; want exported at 0", name, q, ok, v)
			}
		}
	}
}
