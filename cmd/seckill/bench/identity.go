package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/seckill/seckill/cmd/seckill/loadtest"
	"github.com/seckill/seckill/identity"
)

// identityCase measures what identities cost: buys from outside (wrk
// against a `seckill all` child) with the provider's RS256 bearer tokens
// against the same buys with session tokens, server CPU per request; and
// password sign-ins with the argon2id parameters in use, CPU per sign-in
// for a right password, a wrong one and an unknown email (which must cost
// the same as a wrong one).
func identityCase(ctx context.Context, e *Env, o Options) (Table, error) {
	provider, err := mockoidc.NewServer(nil)
	if err != nil {
		return Table{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Table{}, err
	}
	if err := provider.Start(ln, nil); err != nil {
		return Table{}, err
	}
	defer provider.Shutdown()

	w, err := startWrkChild(ctx, e, o, []string{
		"SECKILL_IDENTITY=oidc,guest", "SECKILL_OIDC_ISSUER=" + provider.Issuer(),
		"SECKILL_OIDC_CLIENT_ID=" + provider.ClientID, "SECKILL_OIDC_CLIENT_SECRET=" + provider.ClientSecret,
	})
	if err != nil {
		return Table{}, err
	}
	defer w.close()
	cfg, base, child := w.cfg, w.base, w.Child
	open, err := createSale(ctx, base, cfg.Sessions.AdminToken, 100_000_000, nil)
	if err != nil {
		return Table{}, err
	}
	soldOut, err := createSale(ctx, base, cfg.Sessions.AdminToken, 1, nil)
	if err != nil {
		return Table{}, err
	}

	const users = 2000
	sessionTokens, providerTokens := w.file("sessions.txt"), w.file("provider.txt")
	if err := loadtest.WriteTokens(ctx, loadtest.Options{URL: base, Users: users, JWTSecret: cfg.Sessions.JWTSecret}, sessionTokens); err != nil {
		return Table{}, err
	}
	var b strings.Builder
	now := time.Now()
	for i := range users {
		tok, err := provider.Keypair.SignJWT(jwt.MapClaims{
			"iss": provider.Issuer(), "aud": provider.ClientID, "sub": fmt.Sprintf("bench-%d", i),
			"iat": now.Unix(), "exp": now.Add(2 * time.Hour).Unix(), "email_verified": true,
		})
		if err != nil {
			return Table{}, err
		}
		b.WriteString(tok + "\n")
	}
	if err := os.WriteFile(providerTokens, []byte(b.String()), 0o600); err != nil {
		return Table{}, err
	}
	// Sell the one unit, and let each token be seen once: the cache then
	// holds them all, as it does a minute into a sale.
	for _, f := range []string{sessionTokens, providerTokens} {
		if _, err := w.run(ctx, f, soldOut, "buy", o.Clients, 2*time.Second); err != nil {
			return Table{}, err
		}
	}

	contenders := []struct {
		name, tokens string
		sale         int64
	}{
		{"buy, stock left, session token (HS256)", sessionTokens, open},
		{"buy, stock left, provider token (RS256)", providerTokens, open},
		{"buy, sold out, session token (HS256)", sessionTokens, soldOut},
		{"buy, sold out, provider token (RS256)", providerTokens, soldOut},
	}
	const rounds = 3
	runs := make([][]wrkRun, len(contenders))
	for round := range rounds {
		for k := range contenders {
			i := (k + round) % len(contenders)
			c := contenders[i]
			cpu0 := child.CPU()
			r, err := w.run(ctx, c.tokens, c.sale, "buy", o.Clients, o.Duration/rounds)
			if err != nil {
				return Table{}, fmt.Errorf("%s: %w", c.name, err)
			}
			r.cpu = child.CPU() - cpu0
			runs[i] = append(runs[i], r)
		}
	}
	var rows [][]string
	cpu := make([]float64, len(contenders))
	for i, c := range contenders {
		m := mergeWrk(runs[i])
		cpu[i] = ratio(float64(m.cpu.Microseconds()), float64(m.requests))
		vs := "1.00"
		if i%2 == 1 {
			vs = f2(ratio(cpu[i], cpu[i-1]))
		}
		rows = append(rows, []string{c.name, f0(m.rps), fmt.Sprintf("%.2f", m.p50), fmt.Sprintf("%.2f", m.p99), f2(cpu[i]), vs, m.answers})
	}

	signIn, err := signInCost(ctx, e)
	if err != nil {
		return Table{}, err
	}
	rows = append(rows, signIn.rows...)
	return Table{
		Title: fmt.Sprintf("Identity: provider bearer tokens vs session tokens (wrk, 1 thread, %d connections, %s per route, %d interleaved rounds), and password sign-ins",
			o.Clients, o.Duration, rounds),
		Header: []string{"route", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "CPU × session token", "answers"},
		Rows:   rows,
		Goals: []Goal{
			{What: "server CPU per buy with stock, provider token ≤ 1.10× session token (headroom)", Got: 1.10 - ratio(cpu[1], cpu[0]), Want: 0},
			{What: "server CPU per sold-out buy, provider token ≤ 1.10× session token (headroom)", Got: 1.10 - ratio(cpu[3], cpu[2]), Want: 0},
			{What: "an unknown email costs what a wrong password does: wall time within 0.90–1.10× (headroom)", Got: 0.10 - math.Abs(signIn.unknownVsWrong-1), Want: 0},
		},
		Notes: []string{
			fmt.Sprintf("%d shoppers of each kind, each token seen once before the rounds: the token cache holds its claims, so a provider token's RS256 signature is checked once per token", users),
			"the provider is mockoidc in the bench process (discovery and its JWKS over loopback); the child verifies its tokens with go-oidc and keeps the claims in the same bounded cache as session tokens",
			fmt.Sprintf("sign-ins: the accounts service on this case's MySQL, %d of each, one at a time; CPU is the bench process's user+system time per sign-in (argon2id: %d KiB, t=%d, p=%d), sign-ins/s per core = 1 s / that CPU",
				signIn.n, identity.OWASP.Memory, identity.OWASP.Time, identity.OWASP.Threads),
		},
	}, nil
}

type signInFigures struct {
	rows           [][]string
	n              int
	unknownVsWrong float64
}

// signInCost signs in n times each with a right password, a wrong one and
// an unknown email, and reports the CPU and wall time of each.
func signInCost(ctx context.Context, e *Env) (signInFigures, error) {
	acc := identity.NewAccounts(e.Ledger, identity.LogMail{}, identity.AccountsConfig{PublicURL: "http://localhost"}, time.Now)
	const password = "bench password 1"
	email := "bench-" + e.Config.Redis.Prefix + "@example.com"
	if _, err := acc.SignUp(ctx, email, password); err != nil {
		return signInFigures{}, err
	}
	const n = 30
	kinds := []struct {
		name, email, password string
		ok                    bool
	}{
		{"sign-in, right password", email, password, true},
		{"sign-in, wrong password", email, password + "x", false},
		{"sign-in, unknown email", "nobody-" + email, password, false},
	}
	f := signInFigures{n: n}
	walls := make([]time.Duration, len(kinds))
	for i, k := range kinds {
		cpu0, t0 := selfCPU(), time.Now()
		for range n {
			_, err := acc.SignIn(ctx, k.email, k.password)
			if (err == nil) != k.ok {
				return signInFigures{}, fmt.Errorf("%s: %v", k.name, err)
			}
		}
		walls[i] = time.Since(t0) / n
		cpu := (selfCPU() - cpu0) / n
		f.rows = append(f.rows, []string{k.name, f0(ratio(1, walls[i].Seconds())), fmt.Sprintf("%.2f", float64(walls[i].Microseconds())/1000), "",
			f2(float64(cpu.Microseconds())), fmt.Sprintf("%s sign-ins/s per core", f0(ratio(1, cpu.Seconds()))), ""})
	}
	f.unknownVsWrong = ratio(walls[2].Seconds(), walls[1].Seconds())
	return f, nil
}

// selfCPU is this process's user and system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
