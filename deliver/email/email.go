// Package email is the email push channel: it mails a fired or failed
// outcome (never an expiry or a cancellation) to the address a watch
// names, through the SMTP server in the daemon's configuration, with the
// outcome's sentence as the subject and its observation as the body.
//
// An attempt dials the server, upgrades with STARTTLS (required when
// configured), authenticates when a user is set, and sends one message.
// A connection that fails and an SMTP 4xx answer are retried; a 5xx
// answer is a rejection; a failure after the message text was handed
// over is unknown. Errors never hold the password.
package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

// DefaultTimeout bounds one attempt.
const DefaultTimeout = 30 * time.Second

// Config is the daemon's SMTP configuration.
type Config struct {
	Host string
	// Port defaults to 587.
	Port     int
	Username string
	Password string
	// From is the sender address (default vigil@<host>).
	From string
	// StartTLS requires upgrading the connection with STARTTLS.
	StartTLS bool
	// TLSConfig is used for STARTTLS; nil verifies against Host.
	TLSConfig *tls.Config
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// Links makes each mail's one-click unsubscribe link
	// (List-Unsubscribe); nil sends mails without one.
	Links *Links
}

// Channel is the email deliver.Channel.
type Channel struct {
	cfg Config
}

var _ deliver.Channel = (*Channel)(nil)

// New returns an email channel.
func New(cfg Config) *Channel {
	if cfg.Port == 0 {
		cfg.Port = 587
	}
	if cfg.From == "" {
		cfg.From = "vigil@" + cfg.Host
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Channel{cfg: cfg}
}

// Send implements deliver.Channel: one message through the SMTP server.
func (c *Channel) Send(ctx context.Context, d *deliver.Delivery) (bool, error) {
	o := d.Options.Email
	if o == nil {
		return false, errors.New("no email in the delivery options")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	addr := net.JoinHostPort(c.cfg.Host, strconv.Itoa(c.cfg.Port))
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return true, errors.New("could not connect to the SMTP server")
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	cl, err := smtp.NewClient(conn, c.cfg.Host)
	if err != nil {
		return true, smtpError("greeting", err)
	}
	defer cl.Close()
	if err := cl.Hello("localhost"); err != nil {
		return true, smtpError("HELO", err)
	}
	if c.cfg.StartTLS {
		if ok, _ := cl.Extension("STARTTLS"); !ok {
			return false, errors.New("the SMTP server does not offer STARTTLS, which smtp.starttls requires")
		}
		tc := c.cfg.TLSConfig
		if tc == nil {
			tc = &tls.Config{ServerName: c.cfg.Host, MinVersion: tls.VersionTLS12}
		}
		if err := cl.StartTLS(tc); err != nil {
			return true, smtpError("STARTTLS", err)
		}
	}
	if c.cfg.Username != "" {
		if err := cl.Auth(smtp.PlainAuth("", c.cfg.Username, c.cfg.Password, c.cfg.Host)); err != nil {
			return false, smtpError("AUTH", err)
		}
	}
	if err := cl.Mail(c.cfg.From); err != nil {
		return retryable(err), smtpError("MAIL FROM", err)
	}
	if err := cl.Rcpt(o.To); err != nil {
		return retryable(err), smtpError("RCPT TO", err)
	}
	wc, err := cl.Data()
	if err != nil {
		return retryable(err), smtpError("DATA", err)
	}
	if _, err := wc.Write(Message(c.cfg.From, o.To, c.cfg.Links.URL(d.Watch.ID), d)); err != nil {
		return false, deliver.Unknown(smtpError("message text", err))
	}
	if err := wc.Close(); err != nil {
		var te *textproto.Error
		if errors.As(err, &te) {
			return retryable(err), smtpError("end of message", err)
		}
		return false, deliver.Unknown(smtpError("end of message", err))
	}
	_ = cl.Quit()
	return false, nil
}

// retryable: an SMTP 4xx is temporary; 5xx is permanent.
func retryable(err error) bool {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code < 500
	}
	return true
}

func smtpError(step string, err error) error {
	var te *textproto.Error
	if errors.As(err, &te) {
		return fmt.Errorf("SMTP %s: %d %s", step, te.Code, te.Msg)
	}
	return fmt.Errorf("SMTP %s failed", step)
}

// Message returns the mail for a delivery: the sentence as the subject,
// the observation (summary, facts), the note and the ids as the body.
// With an unsubscribe link, the mail carries it as a one-click
// List-Unsubscribe (RFC 8058) and in its last line.
func Message(from, to, unsubscribe string, d *deliver.Delivery) []byte {
	w := d.Watch
	subject := ""
	var obs *vigil.Observation
	if w.Outcome != nil {
		subject, obs = w.Outcome.Sentence, w.Outcome.Observation
	}
	subject = strings.Join(strings.Fields(subject), " ")
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", from)
	h("To", to)
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("Date", d.Now.Format(time.RFC1123Z))
	h("Message-ID", "<"+d.MessageID+"@vigil>")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	h("X-Vigil-Watch-Id", w.ID)
	h("X-Vigil-State", string(w.State))
	if unsubscribe != "" {
		h("List-Unsubscribe", "<"+unsubscribe+">")
		h("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
	}
	b.WriteString("\r\n")
	var body strings.Builder
	body.WriteString(subject + "\n\n")
	if obs != nil {
		if obs.Summary != "" {
			body.WriteString(obs.Summary + "\n")
		}
		if obs.Reason != "" {
			body.WriteString(obs.Reason + "\n")
		}
		if len(obs.Facts) > 0 {
			f, _ := json.MarshalIndent(obs.Facts, "", "  ")
			body.WriteString("\n" + string(f) + "\n")
		}
	}
	if w.Note != "" {
		body.WriteString("\nNote: " + w.Note + "\n")
	}
	fmt.Fprintf(&body, "\nWatch %s (%s), recipient %s, settled %s.\n", w.ID, w.Kind, w.Recipient, vigil.FormatTime(w.SettledAt))
	if unsubscribe != "" {
		fmt.Fprintf(&body, "To get no more email about this watch: %s\n", unsubscribe)
	}
	// The DATA writer of net/smtp escapes lines that start with a dot.
	for _, line := range strings.Split(body.String(), "\n") {
		b.WriteString(line + "\r\n")
	}
	return b.Bytes()
}
