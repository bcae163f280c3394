package identity

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
)

// A Mailer sends a plain-text mail.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// SMTP sends mail through an SMTP server (a relay on the shop's network:
// no authentication, STARTTLS when the server offers it).
type SMTP struct {
	Addr, From string
}

// Send delivers one mail, within ctx's deadline or 10 s.
func (m SMTP) Send(ctx context.Context, to, subject, body string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(m.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(nil); err != nil {
			return fmt.Errorf("identity: smtp %s: starttls: %w", m.Addr, err)
		}
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("identity: smtp_from %q: %w", m.From, err)
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	msg := "From: " + from.String() + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	return c.Quit()
}

// LogMail writes each mail to the log instead (development and embedded
// mode: a demo signs up without a mail server), then hands it to Next if
// any.
type LogMail struct {
	Next Mailer
}

// Send logs the mail and sends it on.
func (m LogMail) Send(ctx context.Context, to, subject, body string) error {
	slog.Info("identity: mail", "to", to, "subject", subject, "body", strings.TrimSpace(body))
	if m.Next == nil {
		return nil
	}
	return m.Next.Send(ctx, to, subject, body)
}
