// Package mailbox is an SMTP server that keeps the mail it gets, for the
// tests and the load tool: a shopper's verification link is read from it
// as a person would read it from their inbox.
package mailbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Mailbox is an SMTP server on one address.
type Mailbox struct {
	Addr string
	srv  *smtp.Server

	mu      sync.Mutex
	mails   map[string][]string // by recipient, lowercased: the mails' text
	arrived chan struct{}       // closed and replaced at each mail
}

// Listen starts a mailbox on addr ("127.0.0.1:0": any free port).
func Listen(addr string) (*Mailbox, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	mb := &Mailbox{Addr: ln.Addr().String(), mails: map[string][]string{}, arrived: make(chan struct{})}
	mb.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{mb: mb}, nil }))
	mb.srv.Domain = "localhost"
	mb.srv.ReadTimeout, mb.srv.WriteTimeout = 10*time.Second, 10*time.Second
	go func() { _ = mb.srv.Serve(ln) }()
	return mb, nil
}

// Close stops the server.
func (mb *Mailbox) Close() error { return mb.srv.Close() }

type session struct {
	mb *Mailbox
	to []string
}

func (s *session) Reset()                               { s.to = nil }
func (s *session) Logout() error                        { return nil }
func (s *session) Mail(string, *smtp.MailOptions) error { return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, strings.ToLower(to))
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	for _, to := range s.to {
		s.mb.mails[to] = append(s.mb.mails[to], string(b))
	}
	close(s.mb.arrived)
	s.mb.arrived = make(chan struct{})
	s.mb.mu.Unlock()
	return nil
}

// Mails returns the mails to an address so far.
func (mb *Mailbox) Mails(to string) []string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]string(nil), mb.mails[strings.ToLower(to)]...)
}

var linkToken = regexp.MustCompile(`/verify\?token=([A-Za-z0-9_-]+)`)

// Token waits until the n-th mail to an address (from 1) has come, or ctx
// ends, and returns the verification token of its link.
func (mb *Mailbox) Token(ctx context.Context, to string, n int) (string, error) {
	for {
		mb.mu.Lock()
		ms, arrived := mb.mails[strings.ToLower(to)], mb.arrived
		mb.mu.Unlock()
		if len(ms) >= n {
			m := linkToken.FindStringSubmatch(ms[n-1])
			if m == nil {
				return "", fmt.Errorf("mailbox: mail %d to %s holds no verification link", n, to)
			}
			return m[1], nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return "", fmt.Errorf("mailbox: no mail %d to %s: %w", n, to, ctx.Err())
		}
	}
}
