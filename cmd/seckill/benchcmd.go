package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/configs"
)

func runBench(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("bench")
	var names []string
	for _, c := range bench.Cases {
		names = append(names, c.Name)
	}
	cases := fs.String("case", "", "comma-separated cases to run (default all: "+strings.Join(names, ", ")+")")
	o := bench.Options{}
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "how long each timed contender runs")
	fs.IntVar(&o.Orders, "orders", 100_000, "orders through the pipeline case")
	fs.IntVar(&o.Clients, "clients", 64, "concurrent clients where a case has them")
	fs.IntVar(&o.WSClients, "ws-clients", 10_000, "WebSocket clients of the fan-out case")
	fs.IntVar(&o.Crowd, "crowd", 20_000, "shoppers in the waiting room case's pre-queue")
	fs.StringVar(&o.Chart, "chart", "capacity.png", "where the capacity case writes its chart (p99 against the arrival rate)")
	fs.StringVar(&o.Baseline, "baseline", "", "an earlier seckill binary the embedded case also runs embedded, for a before/after in the same run")
	fs.StringVar(&o.Binary, "binary", "", "the seckill binary the cases with a child process start (embedded, outside, ws); default this one — point it at an earlier build to measure a change")
	out := fs.String("out", "", "also write the report to this markdown file (for example BENCHMARKS.md)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	var selected []string
	if *cases != "" {
		selected = strings.Split(*cases, ",")
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	tables, err := bench.Run(ctx, cfg, selected, o, os.Stderr)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Benchmarks\n\nMeasured %s on %s, in %s.\n\n", start.UTC().Format("2006-01-02 15:04 MST"),
		bench.Machine(), time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "Reproduce with `make bench` (or `seckill bench %s`). Every ratio compares contenders measured in the same run.\n\n",
		strings.Join(args, " "))
	bench.Markdown(&b, tables)
	os.Stdout.Write(b.Bytes())
	if *out != "" && len(tables) > 0 {
		if werr := os.WriteFile(*out, b.Bytes(), 0o644); werr != nil {
			return werr
		}
	}
	return err
}
