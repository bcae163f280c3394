package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
)

// articleCase is the classic comparison for one hot item: 64 clients (by
// default) deduct stock for a fixed time each, with a MySQL transaction
// and SELECT … FOR UPDATE, with Redis WATCH/MULTI/EXEC and client retries,
// with the buy Lua script one request per call, and with the script
// deciding a batch per call. Each contender ends with a correctness check:
// the final stock equals the initial stock minus the successes.
func articleCase(ctx context.Context, e *Env, o Options) (Table, error) {
	const stock = 100_000_000
	type contender struct {
		name string
		run  func(ctx context.Context, client int, stop func() bool, t *tally) error
		// check verifies the final state against the successes.
		check func(ctx context.Context, successes int64) error
	}
	if _, err := e.DB.ExecContext(ctx, "CREATE TABLE bench_stock (id INT PRIMARY KEY, available BIGINT NOT NULL) ENGINE=InnoDB"); err != nil {
		return Table{}, err
	}
	if _, err := e.DB.ExecContext(ctx, "INSERT INTO bench_stock VALUES (1, ?)", stock); err != nil {
		return Table{}, err
	}
	watchKey := e.Config.Redis.Prefix + ":bench:watch-stock"
	if err := e.Redis.Set(ctx, watchKey, stock, 0).Err(); err != nil {
		return Table{}, err
	}
	srv, err := e.server(e.Config, nil)
	if err != nil {
		return Table{}, err
	}
	var luaSales [2]seckill.Sale
	for i := range luaSales {
		if luaSales[i], err = e.sale(ctx, srv, stock, 1, 100); err != nil {
			return Table{}, err
		}
	}
	const batch = 32
	luaRun := func(sale int64, n int) func(ctx context.Context, client int, stop func() bool, t *tally) error {
		return func(ctx context.Context, client int, stop func() bool, t *tally) error {
			reqs := make([]seckill.Buy, n)
			for seq := 0; !stop(); seq++ {
				for i := range reqs {
					u := fmt.Sprintf("c%d-%d-%d", client, seq, i)
					reqs[i] = seckill.Buy{UserID: u, Qty: 1, RequestID: "bench-" + u, OrderID: seckill.NewOrderID(sale)}
				}
				d, err := e.Inv.Reserve(ctx, sale, reqs)
				if err != nil {
					return err
				}
				for _, a := range d.Answers {
					t.attempts.Add(1)
					if a.Code == seckill.CodeOK {
						t.ok.Add(1)
					}
				}
			}
			return nil
		}
	}
	luaCheck := func(sale int64) func(ctx context.Context, successes int64) error {
		return func(ctx context.Context, successes int64) error {
			st, err := e.Inv.Stock(ctx, sale)
			if err != nil {
				return err
			}
			if st.Available != stock-successes || st.Sold != successes {
				return fmt.Errorf("available %d, sold %d after %d successes", st.Available, st.Sold, successes)
			}
			return nil
		}
	}
	contenders := []contender{
		{"MySQL transaction, SELECT … FOR UPDATE", func(ctx context.Context, _ int, stop func() bool, t *tally) error {
			for !stop() {
				t.attempts.Add(1)
				tx, err := e.DB.BeginTxx(ctx, nil)
				if err != nil {
					return err
				}
				var avail int64
				if err := tx.GetContext(ctx, &avail, "SELECT available FROM bench_stock WHERE id = 1 FOR UPDATE"); err != nil {
					tx.Rollback()
					return err
				}
				if avail > 0 {
					if _, err := tx.ExecContext(ctx, "UPDATE bench_stock SET available = available - 1 WHERE id = 1"); err != nil {
						tx.Rollback()
						return err
					}
				}
				if err := tx.Commit(); err != nil {
					t.conflicts.Add(1) // deadlock or lock wait: the client would retry
					continue
				}
				if avail > 0 {
					t.ok.Add(1)
				}
			}
			return nil
		}, func(ctx context.Context, successes int64) error {
			var avail int64
			if err := e.DB.GetContext(ctx, &avail, "SELECT available FROM bench_stock WHERE id = 1"); err != nil {
				return err
			}
			if avail != stock-successes {
				return fmt.Errorf("available %d after %d successes", avail, successes)
			}
			return nil
		}},
		{"Redis WATCH/MULTI/EXEC, client retries", func(ctx context.Context, _ int, stop func() bool, t *tally) error {
			for !stop() {
				t.attempts.Add(1)
				err := e.Redis.Watch(ctx, func(tx *redis.Tx) error {
					n, err := tx.Get(ctx, watchKey).Int64()
					if err != nil || n <= 0 {
						return err
					}
					_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Decr(ctx, watchKey)
						return nil
					})
					return err
				}, watchKey)
				switch {
				case errors.Is(err, redis.TxFailedErr):
					t.conflicts.Add(1) // another client changed the key: retry
				case err != nil:
					return err
				default:
					t.ok.Add(1)
				}
			}
			return nil
		}, func(ctx context.Context, successes int64) error {
			n, err := e.Redis.Get(ctx, watchKey).Int64()
			if err != nil {
				return err
			}
			if n != stock-successes {
				return fmt.Errorf("stock %d after %d successes", n, successes)
			}
			return nil
		}},
		{"Lua EVALSHA (buy.lua), one request per call", luaRun(luaSales[0].ID, 1), luaCheck(luaSales[0].ID)},
		{fmt.Sprintf("Lua EVALSHA (buy.lua), %d requests per call", batch), luaRun(luaSales[1].ID, batch), luaCheck(luaSales[1].ID)},
	}

	rows := make([][]string, 0, len(contenders))
	rates := make([]float64, len(contenders))
	for i, c := range contenders {
		t := &tally{}
		d, err := runClients(ctx, o.Clients, o.Duration, t, c.run)
		if err != nil {
			return Table{}, fmt.Errorf("%s: %w", c.name, err)
		}
		verdict := "exact"
		if err := c.check(ctx, t.ok.Load()); err != nil {
			verdict = "WRONG: " + err.Error()
		}
		rates[i] = float64(t.ok.Load()) / d.Seconds()
		conflict := ratio(float64(t.conflicts.Load()), float64(t.attempts.Load()))
		rows = append(rows, []string{
			c.name, f0(rates[i]), f0(float64(t.attempts.Load()) / d.Seconds()), fmt.Sprintf("%.1f%%", 100*conflict),
			verdict, f2(ratio(rates[i], rates[0])),
		})
	}
	return Table{
		Title:  fmt.Sprintf("One hot item: %d clients, %s each, real MySQL and Redis", o.Clients, o.Duration),
		Header: []string{"contender", "deductions/s", "attempts/s", "conflicts", "final stock", "× FOR UPDATE"},
		Rows:   rows,
		Goals: []Goal{
			{What: "Lua, one request per call, ≥ 10× FOR UPDATE", Got: ratio(rates[2], rates[0]), Want: 10},
			{What: "Lua, batched, ≥ 10× FOR UPDATE", Got: ratio(rates[3], rates[0]), Want: 10},
		},
		Notes: []string{
			"the Lua contenders run the whole buy script: window, idempotency record, per-user cap, stock, outbox event",
			"WATCH/MULTI/EXEC conflicts are transactions the server aborted because another client touched the key; each is retried",
		},
	}, nil
}

// tally counts a contender's outcomes.
type tally struct {
	ok, attempts, conflicts atomic.Int64
}

// runClients runs n clients of fn for d and returns how long they ran.
func runClients(ctx context.Context, n int, d time.Duration, t *tally,
	fn func(ctx context.Context, client int, stop func() bool, t *tally) error) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(d)
	stop := func() bool { return time.Now().After(deadline) || ctx.Err() != nil }
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn(ctx, i, stop, t) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}
