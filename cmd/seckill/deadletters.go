package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/worker"
)

func runDeadLetters(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("deadletters")
	limit := fs.Int("max", 1000, "list at most this many")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: seckill deadletters list [--max N]
       seckill deadletters replay

list shows the dead-letter queue: each message's id, the queue it came
from, the orders or movements of money it carries and why the worker gave
it up. replay moves the well-formed ones (order events, payment timeouts
and movements of money that decode and validate) back to their queues, to
be processed again (the ledger keeps each order and each transfer once,
Redis follows each movement once); malformed ones stay.`)
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: deadletters needs list or replay", errUsage)
	}
	verb := args[0]
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := notEmbedded(cfg, "deadletters"); err != nil {
		return err
	}
	sys, err := system.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer sys.Close()
	switch verb {
	case "list":
		return listDeadLetters(ctx, os.Stdout, sys.Bus, *limit)
	case "replay":
		n, err := sys.Bus.Replay(ctx, replayable)
		fmt.Printf("replayed %d dead letters\n", n)
		if err != nil {
			return err
		}
		return listDeadLetters(ctx, os.Stdout, sys.Bus, *limit)
	}
	return fmt.Errorf("%w: deadletters %q: want list or replay", errUsage, verb)
}

// replayable accepts the dead letters that would be processed if sent
// again: well-formed order events, payment timeouts and movements of
// money.
func replayable(m bus.Message) bool {
	switch m.Headers[bus.HeaderQueue] {
	case bus.Orders:
		_, err := worker.DecodeEvents(m.Body)
		return err == nil
	case bus.Timeouts:
		_, err := worker.DecodeTimeout(m.Body)
		return err == nil
	case bus.Funds:
		_, err := worker.DecodeMovements(m.Body)
		return err == nil
	}
	return false
}

// carries says what a dead letter holds, "-" when it does not decode.
func carries(m bus.Message) string {
	switch m.Headers[bus.HeaderQueue] {
	case bus.Orders:
		if evs, err := worker.DecodeEvents(m.Body); err == nil {
			return fmt.Sprintf("%d orders (sale %d, first %s)", len(evs), evs[0].SaleID, evs[0].OrderID)
		}
	case bus.Funds:
		if ms, err := worker.DecodeMovements(m.Body); err == nil {
			return fmt.Sprintf("%d movements (first %s)", len(ms), ms[0].ID)
		}
	}
	return "-"
}

func listDeadLetters(ctx context.Context, out io.Writer, b bus.Bus, limit int) error {
	dead, err := b.DeadLetters(ctx, limit)
	if err != nil {
		return err
	}
	if len(dead) == 0 {
		fmt.Fprintln(out, "the dead-letter queue is empty")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "message\tqueue\tcarries\treplayable\treason")
	for _, m := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", m.ID, m.Headers[bus.HeaderQueue], carries(m), replayable(m), m.Headers[bus.HeaderReason])
	}
	tw.Flush()
	fmt.Fprintf(out, "%d dead letters listed\n", len(dead))
	return nil
}
