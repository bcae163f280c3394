package identity

import (
	"context"
	"crypto/tls"
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
	if err := m.send(ctx, to, subject, body); err != nil {
		return fmt.Errorf("identity: smtp %s: %w", m.Addr, err)
	}
	return nil
}

func (m SMTP) send(ctx context.Context, to, subject, body string) error {
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("smtp_from %q: %w", m.From, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(m.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	msg := "From: " + from.String() + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
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
