package bench_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/system/servertest"
)

// TestCasesRun runs every case at a small size: the suite must keep
// working (it checks its own results, such as the row count), whatever the
// figures on this machine are.
func TestCasesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmark suite in small")
	}
	cfg := servertest.Config(t)
	// Cases start seckill as a child process.
	bin := servertest.Binary(t)
	o := bench.Options{Duration: 500 * time.Millisecond, Orders: 2000, Clients: 8, WSClients: 300, Crowd: 300, Binary: bin, Chart: filepath.Join(t.TempDir(), "capacity.png"),
		Rates: []float64{500, 1000}}
	tables, err := bench.Run(context.Background(), cfg, nil, o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(bench.Cases) {
		t.Fatalf("%d tables for %d cases", len(tables), len(bench.Cases))
	}
	var b bytes.Buffer
	bench.Markdown(&b, tables)
	for _, tb := range tables {
		if len(tb.Rows) < 2 || len(tb.Goals) == 0 {
			t.Errorf("%s: %d rows, %d goals", tb.Title, len(tb.Rows), len(tb.Goals))
		}
		for _, row := range tb.Rows {
			for _, cell := range row {
				if strings.HasPrefix(cell, "WRONG") {
					t.Errorf("%s: %v", tb.Title, row)
				}
			}
		}
		if !strings.Contains(b.String(), tb.Title) {
			t.Errorf("report lacks %q", tb.Title)
		}
	}
	t.Log("\n" + b.String())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
