package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/configs"
	"github.com/seckill/seckill/identity/mailbox"
)

func runLoadtest(ctx context.Context, cfg configs.Config, args []string) error {
	fs := command("loadtest")
	o := loadtest.Options{Progress: os.Stderr}
	fs.StringVar(&o.URL, "url", "http://"+cfg.HTTP.Addr, "the server to load")
	fs.Int64Var(&o.SaleID, "sale", 0, "the sale to buy from; 0 creates one (see --create-sale)")
	fs.StringVar(&o.CreateSale, "create-sale", "total=1000,limit=2,price=100,start=0s,duration=1h",
		"the sale to create when --sale is 0 (start is a delay from now; add ticket=1 and pow=N for a sale with buy tickets, verified=1 for verified shoppers only)")
	fs.StringVar(&o.AdminToken, "admin-token", cfg.Sessions.AdminToken, "admin bearer token (creates the sale, reads stats); default SECKILL_ADMIN_TOKEN")
	fs.IntVar(&o.Users, "users", 1000, "distinct shoppers")
	fs.StringVar(&o.JWTSecret, "jwt-secret", os.Getenv("SECKILL_JWT_SECRET"),
		"mint tokens offline with this secret (default SECKILL_JWT_SECRET); empty: sign each user in with POST /api/session")
	smtpAddr := fs.String("accounts-smtp", "", "sign each user up as a built-in account and confirm it by mail: listen for the server's mail (its SECKILL_SMTP_ADDR) on this address, e.g. 127.0.0.1:2525; the server must allow the sign-ups (SECKILL_RATE_SIGNUP_PER_IP=0)")
	fs.Int64Var(&o.Qty, "qty", 1, "units per buy")
	fs.Float64Var(&o.Retries, "retries", 0, "share of requests (0..1) that resend an earlier request_id, to exercise idempotency")
	fs.IntVar(&o.Concurrency, "c", 64, "closed loop: concurrent workers, each sending as soon as it has an answer")
	fs.Float64Var(&o.Rate, "rate", 0, "open loop: requests per second on a fixed schedule (overrides -c)")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", 10000, "open loop: most requests outstanding at once")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&o.Requests, "n", 0, "total requests to send (overrides --duration)")
	fs.DurationVar(&o.WaitPersist, "wait-persist", 0, "also check that MySQL holds every accepted order within this time (needs the admin token)")
	tickets := fs.Bool("tickets", true, "on a sale with require_ticket, get each user a ticket (solving its proof of work) like a client; false sends buys without, to measure the refusals")
	tokensOut := fs.String("tokens-out", "", "write one token per user to this file and exit (for wrk: scripts/wrk/buy.lua)")
	jsonOut := fs.String("json", "", "write the report as JSON to this file (- for stdout)")
	var crowd loadtest.CrowdOptions
	fs.IntVar(&crowd.Shoppers, "crowd", 0, "drive a sale with a waiting room like a crowd of this many shoppers, joining at random moments before the start (--sale: one whose queue is open; else one is created that starts in --lead); they follow the room, buy one unit when let in, and the fairness is audited")
	fs.IntVar(&crowd.Late, "late", 0, "crowd: shoppers joining one after the other after the start")
	fs.DurationVar(&crowd.Lead, "lead", 10*time.Second, "crowd: a created sale starts this long after its queue opens (now)")
	fs.Int64Var(&crowd.AdmitPerSecond, "admit-per-second", 500, "crowd: a created sale's admission rate")
	fs.IntVar(&crowd.Watchers, "watchers", 20, "crowd: WebSocket connections following the room")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.NoTickets = !*tickets
	if *smtpAddr != "" {
		mb, err := mailbox.Listen(*smtpAddr)
		if err != nil {
			return err
		}
		defer mb.Close()
		o.Accounts, o.Mailbox = true, mb
	}
	if *tokensOut != "" {
		return loadtest.WriteTokens(ctx, o, *tokensOut)
	}
	if crowd.Shoppers > 0 {
		crowd.URL, crowd.SaleID, crowd.AdminToken, crowd.JWTSecret, crowd.Progress = o.URL, o.SaleID, o.AdminToken, o.JWTSecret, os.Stderr
		rep, err := loadtest.Crowd(ctx, crowd)
		if rep.Joined == 0 && err != nil {
			return err
		}
		fmt.Fprint(os.Stderr, rep.String())
		if *jsonOut != "" {
			if jerr := writeJSON(*jsonOut, rep); jerr != nil {
				return jerr
			}
		}
		return err
	}
	rep, err := loadtest.Run(ctx, o)
	if rep.Requests == 0 && err != nil {
		return err
	}
	rep.Print(os.Stderr)
	if *jsonOut != "" {
		if jerr := writeJSON(*jsonOut, rep); jerr != nil {
			return jerr
		}
	}
	if errors.Is(err, loadtest.ErrAudit) {
		return fmt.Errorf("loadtest: %w", err)
	}
	return err
}

// writeJSON writes v as indented JSON to path ("-": stdout).
func writeJSON(path string, v any) error {
	w := os.Stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
