package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system/servertest"
)

// stack is a server on a test env.
type stack struct {
	*servertest.Env
	srv *server.Server
	h   http.Handler
}

func newStack(t *testing.T, overrides ...string) *stack {
	t.Helper()
	env := servertest.New(t, overrides...)
	srv := env.Server(t, nil)
	return &stack{Env: env, srv: srv, h: srv.Handler()}
}

// response is a recorded answer with its JSON body decoded.
type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// code is the API error code of the answer, "" for a success.
func (r response) code() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// message is the API error message of the answer, "" for a success.
func (r response) message() string {
	e, _ := r.Body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Raw) }

// call sends a request straight into the handler. body is sent as is if it
// is a string, else encoded as JSON; headers are "Name: value" strings.
func call(t testing.TB, h http.Handler, method, path string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	req.RemoteAddr = "192.0.2.1:1234"
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := response{Status: rec.Code, Header: rec.Header(), Raw: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &res.Body); err != nil {
			t.Fatalf("%s %s: bad JSON %q: %v", method, path, rec.Body.String(), err)
		}
	}
	return res
}

func bearer(tok string) string { return "Authorization: Bearer " + tok }

func admin() string { return bearer(servertest.AdminToken) }

func buyPath(sale int64) string { return fmt.Sprintf("/api/sales/%d/buy", sale) }

func buyBody(qty int64, rid string) map[string]any {
	return map[string]any{"qty": qty, "request_id": rid}
}

// num reads a JSON number field as int64.
func num(m map[string]any, k string) int64 {
	f, _ := m[k].(float64)
	return int64(f)
}
