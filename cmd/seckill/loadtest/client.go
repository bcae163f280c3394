package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/tickets"
)

// client speaks the HTTP API of API.md.
type client struct {
	base    string
	http    *http.Client
	admin   string
	buyPath string // with %d for the sale; empty: /api/sales/%d/buy
}

type saleView struct {
	ID           int64 `json:"id"`
	Total        int64 `json:"total"`
	Remaining    int64 `json:"remaining"`
	Sold         int64 `json:"sold"`
	PerUserLimit int64 `json:"per_user_limit"`
	// The sale's bot defence (API.md, buy tickets).
	RequireTicket bool `json:"require_ticket"`
	PowDifficulty int  `json:"pow_difficulty"`
	WaitingRoom   bool `json:"waiting_room"`
}

type statsView struct {
	OrdersPersisted int64 `json:"orders_persisted"`
}

// do sends a JSON request and decodes a JSON answer into out; a non-2xx
// answer becomes an error with its API error code.
func (c *client) do(ctx context.Context, method, path, bearer string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return res.StatusCode, &apiError{status: res.StatusCode, code: e.Error.Code, msg: e.Error.Message}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: bad answer %q: %w", method, path, data, err)
		}
	}
	return res.StatusCode, nil
}

type apiError struct {
	status    int
	code, msg string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.status, e.code, e.msg) }

// buy sends one buy. A refusal with an API error code is not an error: it
// comes back as status and code. err is a transport failure (or an answer
// that is not the API's).
func (c *client) buy(ctx context.Context, sale int64, token string, qty int64, rid, ticket string) (status int, code, order string, err error) {
	var extra map[string]any
	if ticket != "" {
		extra = map[string]any{"ticket": ticket}
	}
	return c.buyWith(ctx, sale, token, qty, rid, extra)
}

// buyWith sends one buy with extra fields in its body (a ticket, a pass).
func (c *client) buyWith(ctx context.Context, sale int64, token string, qty int64, rid string, extra map[string]any) (status int, code, order string, err error) {
	var ok struct {
		OrderID string `json:"order_id"`
	}
	path := c.buyPath
	if path == "" {
		path = "/api/sales/%d/buy"
	}
	body := map[string]any{"qty": qty, "request_id": rid}
	for k, v := range extra {
		body[k] = v
	}
	status, err = c.do(ctx, "POST", fmt.Sprintf(path, sale), token, body, &ok)
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.code == "" {
			return status, "", "", fmt.Errorf("HTTP %d without an API error body", status)
		}
		return status, ae.code, "", nil
	}
	return status, "", ok.OrderID, err
}

// ticket gets a buy ticket for sale as the shopper page does: with a
// proof of work first when the sale asks for one. hashes is how many
// nonces were tried.
func (c *client) ticket(ctx context.Context, sale int64, token string, difficulty int) (ticket string, exp time.Time, hashes int64, err error) {
	body := map[string]string{}
	if difficulty > 0 {
		var ch struct {
			Challenge  string `json:"challenge"`
			Difficulty int    `json:"difficulty"`
		}
		if _, err := c.do(ctx, "GET", fmt.Sprintf("/api/sales/%d/challenge", sale), token, nil, &ch); err != nil {
			return "", exp, 0, fmt.Errorf("challenge: %w", err)
		}
		nonce := ""
		for n := int64(0); nonce == ""; n++ {
			if s := strconv.FormatInt(n, 10); tickets.Solves(ch.Challenge, s, ch.Difficulty) {
				nonce, hashes = s, n+1
			}
		}
		body = map[string]string{"challenge": ch.Challenge, "nonce": nonce}
	}
	var t struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if _, err := c.do(ctx, "POST", fmt.Sprintf("/api/sales/%d/ticket", sale), token, body, &t); err != nil {
		return "", exp, hashes, fmt.Errorf("ticket: %w", err)
	}
	return t.Ticket, t.ExpiresAt, hashes, nil
}

func (c *client) sale(ctx context.Context, id int64) (saleView, error) {
	var s saleView
	_, err := c.do(ctx, "GET", fmt.Sprintf("/api/sales/%d", id), "", nil, &s)
	return s, err
}

func (c *client) stats(ctx context.Context, id int64) (statsView, error) {
	if c.admin == "" {
		return statsView{}, errors.New("no admin token (--admin-token or SECKILL_ADMIN_TOKEN)")
	}
	var s statsView
	_, err := c.do(ctx, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", id), c.admin, nil, &s)
	return s, err
}

// waitPersisted polls the sale's stats until MySQL holds want orders or
// limit passes; it returns the last count.
func (c *client) waitPersisted(ctx context.Context, sale, want int64, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := c.stats(ctx, sale)
		if err != nil {
			return 0, err
		}
		if st.OrdersPersisted >= want || time.Now().After(deadline) {
			return st.OrdersPersisted, nil
		}
		select {
		case <-ctx.Done():
			return st.OrdersPersisted, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// session signs a user in by name and returns the server's user id and token.
func (c *client) session(ctx context.Context, name string) (id, token string, err error) {
	var s struct {
		UserID string `json:"user_id"`
		Token  string `json:"token"`
	}
	_, err = c.do(ctx, "POST", "/api/session", "", map[string]string{"name": name}, &s)
	return s.UserID, s.Token, err
}

// signUp opens an account and returns its user id and (not yet verified)
// session token.
func (c *client) signUp(ctx context.Context, email, password string) (id, token string, err error) {
	var s struct {
		UserID string `json:"user_id"`
		Token  string `json:"token"`
	}
	_, err = c.do(ctx, "POST", "/api/accounts", "", map[string]string{"email": email, "password": password}, &s)
	return s.UserID, s.Token, err
}

// verify confirms an account's email with the token of its link, signed
// in as it, and returns the session token that says verified.
func (c *client) verify(ctx context.Context, link, token string) (string, error) {
	var s struct {
		Token string `json:"token"`
	}
	if _, err := c.do(ctx, "POST", "/api/accounts/verify", token, map[string]string{"token": link}, &s); err != nil {
		return "", err
	}
	if s.Token == "" {
		return "", errors.New("loadtest: verified, but no session came back")
	}
	return s.Token, nil
}

// createSale creates a sale from a spec such as
// "total=1000,limit=2,price=100,start=0s,duration=1h,ticket=1,pow=8"
// (start: delay from now; ticket=1: buys need a ticket; pow: its proof of
// work's difficulty; verified=1: only verified identities buy).
func (c *client) createSale(ctx context.Context, spec, runID string) (int64, error) {
	if c.admin == "" {
		return 0, errors.New("creating a sale needs the admin token (--admin-token or SECKILL_ADMIN_TOKEN); or pass --sale")
	}
	v := map[string]string{"total": "1000", "limit": "1", "price": "100", "start": "0s", "duration": "1h", "ticket": "0", "pow": "0", "verified": "0"}
	if spec != "" {
		for _, kv := range strings.Split(spec, ",") {
			k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if _, known := v[k]; !ok || !known {
				return 0, fmt.Errorf("--create-sale: %q is not one of total=, limit=, price=, start=, duration=, ticket=, pow=, verified=", kv)
			}
			v[k] = val
		}
	}
	num := func(k string) (int64, error) {
		n, err := strconv.ParseInt(v[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("--create-sale %s=%q: %w", k, v[k], err)
		}
		return n, nil
	}
	total, err1 := num("total")
	limit, err2 := num("limit")
	price, err3 := num("price")
	start, err4 := time.ParseDuration(v["start"])
	dur, err5 := time.ParseDuration(v["duration"])
	pow, err6 := num("pow")
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return 0, err
	}
	// A second back: "start=0s" means open now, even with a little clock skew.
	startsAt := time.Now().Add(start - time.Second)
	var s saleView
	_, err := c.do(ctx, "POST", "/admin/api/sales", c.admin, map[string]any{
		"name": "loadtest " + runID, "item": "load test item", "price_cents": price, "total": total,
		"per_user_limit": limit, "starts_at": startsAt.UTC().Format(time.RFC3339Nano),
		"ends_at":        startsAt.Add(dur).UTC().Format(time.RFC3339Nano),
		"require_ticket": v["ticket"] == "1" || v["ticket"] == "true", "pow_difficulty": pow,
		"verified_only": v["verified"] == "1" || v["verified"] == "true",
	}, &s)
	if err != nil {
		return 0, fmt.Errorf("create sale: %w", err)
	}
	return s.ID, nil
}

func mintToken(secret, userID string) (string, error) {
	tok, _, err := sessions.MintToken([]byte(secret), userID, userID, 2*time.Hour, time.Now())
	return tok, err
}
