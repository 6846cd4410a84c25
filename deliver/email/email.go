// Package email is the email push channel: it mails a fired or failed
// outcome (never an expiry or a cancellation) to the address a watch
// names, through the SMTP server in the daemon's configuration, with the
// outcome's sentence as the subject and its observation as the body.
//
// An attempt dials the server, speaks TLS from the first byte when
// configured (implicit TLS, RFC 8314, the port 465 of "SMTPS") or else
// upgrades with STARTTLS (required when configured), authenticates when a user is set, and sends one message.
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
	"io"
	"mime/quotedprintable"
	"net"
	"net/netip"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// From is the sender address (default vigil@<host>, vigil@[<host>]
	// when it is an IP address).
	From string
	// StartTLS requires upgrading the connection with STARTTLS.
	StartTLS bool
	// TLS speaks TLS from the connection's first byte (implicit TLS, RFC
	// 8314: "SMTPS", port 465); STARTTLS is then not asked for, the
	// connection being encrypted already.
	TLS bool
	// TLSConfig is used for TLS and STARTTLS; nil verifies against Host.
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
		cfg.From = "vigil@" + domainOf(cfg.Host)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Channel{cfg: cfg}
}

// domainOf returns the domain of an address at host: host, or when it is
// an IP address the address literal RFC 5321 (4.1.3) spells,
// [192.0.2.1] or [IPv6:2001:db8::1].
func domainOf(host string) string {
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return host
	case ip.Is4() || ip.Is4In6():
		return "[" + ip.Unmap().String() + "]"
	}
	return "[IPv6:" + ip.WithZone("").String() + "]"
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
	// The deadline bounds the attempt; its context's end (the dispatcher
	// cutting the attempts in flight) ends it too, at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if c.cfg.TLS {
		// Implicit TLS: the certificate is verified as for STARTTLS, and a
		// handshake that fails is tried again as a STARTTLS that fails is.
		// net/smtp sees a *tls.Conn, and sends a password over it.
		tc := tls.Client(conn, c.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return true, smtpError("TLS handshake", err)
		}
		conn = tc
	}
	cl, err := smtp.NewClient(conn, c.cfg.Host)
	if err != nil {
		return retryable(err), smtpError("greeting", err)
	}
	defer cl.Close()
	if err := cl.Hello("localhost"); err != nil {
		return retryable(err), smtpError("HELO", err)
	}
	if c.cfg.StartTLS && !c.cfg.TLS {
		if ok, _ := cl.Extension("STARTTLS"); !ok {
			return false, errors.New("the SMTP server does not offer STARTTLS, which smtp.starttls requires")
		}
		if err := cl.StartTLS(c.tlsConfig()); err != nil {
			return retryable(err), smtpError("STARTTLS", err)
		}
	}
	// A server that does not take 8-bit text (RFC 6152) is sent the body
	// quoted-printable.
	eight, _ := cl.Extension("8BITMIME")
	if c.cfg.Username != "" {
		if err := cl.Auth(smtp.PlainAuth("", c.cfg.Username, c.cfg.Password, c.cfg.Host)); err != nil {
			// A 4xx or a connection lost is tried again; a 5xx, or net/smtp
			// refusing to send the password over plaintext, is final.
			return retryable(err) && (isAnswer(err) || isNetwork(err)), smtpError("AUTH", err)
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
	if _, err := wc.Write(message(c.cfg.From, o.To, c.cfg.Links.URL(d.Watch.ID), d, !eight)); err != nil {
		return false, deliver.Unknown(smtpError("message text", err))
	}
	if err := wc.Close(); err != nil {
		// The message text was handed over: only a 4xx or a 5xx says the
		// server does not hold it. Another 2xx than the 250 net/smtp
		// expects took it; anything else may have, and is not sent again.
		var te *textproto.Error
		switch {
		case errors.As(err, &te) && te.Code >= 200 && te.Code < 300:
		case errors.As(err, &te) && te.Code >= 400 && te.Code < 600:
			return retryable(err), smtpError("end of message", err)
		default:
			return false, deliver.Unknown(smtpError("end of message", err))
		}
	}
	_ = cl.Quit()
	return false, nil
}

// tlsConfig is the TLS configuration for TLS and STARTTLS: the one
// configured, or one that verifies the server's certificate against Host.
func (c *Channel) tlsConfig() *tls.Config {
	if c.cfg.TLSConfig != nil {
		return c.cfg.TLSConfig
	}
	return &tls.Config{ServerName: c.cfg.Host, MinVersion: tls.VersionTLS12}
}

// retryable: an SMTP 4xx is temporary; 5xx is permanent.
func retryable(err error) bool {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code < 500
	}
	return true
}

// isAnswer reports whether err is an SMTP server's answer.
func isAnswer(err error) bool {
	var te *textproto.Error
	return errors.As(err, &te)
}

// isNetwork reports whether err is the connection failing (a network
// error, a deadline, the server hanging up), not a refusal of the client's.
func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
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
//
// Much of the text comes from outside (a note, a sentence quoting a
// forge's title, facts from an HTTP body). Every line break in it is
// made one "\n" (so "\r\n" and a lone "\r" never reach the wire but as
// the mail's own CRLF, and no bare CR can end the SMTP data early) and
// every other control character but tab is dropped. The subject is folded
// into lines of at most 78 characters, as RFC 2047 encoded-words when it
// is not plain ASCII or holds a word too long to fold; a body with a line
// longer than SMTP's 998 octets is sent quoted-printable (and so is a
// body that is not ASCII, to a server that does not take 8-bit text).
func Message(from, to, unsubscribe string, d *deliver.Delivery) []byte {
	return message(from, to, unsubscribe, d, false)
}

// message is Message, its body quoted-printable when it is not ASCII and
// sevenBit says the server takes 7-bit text only (no 8BITMIME).
func message(from, to, unsubscribe string, d *deliver.Delivery, sevenBit bool) []byte {
	w := d.Watch
	subject := ""
	var obs *vigil.Observation
	if w.Outcome != nil {
		subject, obs = w.Outcome.Sentence, w.Outcome.Observation
	}
	subject = strings.Join(strings.Fields(clean(subject)), " ")
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
	text := clean(body.String())
	encoding := "8bit"
	if longestLine(text) > maxLine || sevenBit && !ascii(text) {
		encoding = "quoted-printable"
	}

	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", from)
	h("To", to)
	h("Subject", foldSubject(subject))
	h("Date", d.Now.Format(time.RFC1123Z))
	h("Message-ID", "<"+d.MessageID+"@vigil>")
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", encoding)
	h("X-Vigil-Watch-Id", w.ID)
	h("X-Vigil-State", string(w.State))
	if unsubscribe != "" {
		h("List-Unsubscribe", "<"+unsubscribe+">")
		h("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
	}
	b.WriteString("\r\n")
	// The DATA writer of net/smtp escapes lines that start with a dot.
	if encoding == "quoted-printable" {
		qp := quotedprintable.NewWriter(&b)
		_, _ = qp.Write([]byte(text)) // "\n" becomes CRLF; lines of at most 76
		_ = qp.Close()
		return b.Bytes()
	}
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(line + "\r\n")
	}
	return b.Bytes()
}

// maxLine is the longest line SMTP carries (RFC 5321 4.5.3.1.6: 1 000
// octets with the CRLF); a server may refuse a mail with a longer one.
const maxLine = 998

// maxHeaderLine is the line length RFC 5322 asks headers to keep to.
const maxHeaderLine = 78

// clean returns s with every line break ("\r\n", a lone "\r") made "\n"
// and every other C0 control character and DEL but tab dropped.
func clean(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' && c != '\n' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r':
			b.WriteByte('\n')
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		case c < ' ' && c != '\t' && c != '\n' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func longestLine(s string) int {
	n := 0
	for line := range strings.SplitSeq(s, "\n") {
		n = max(n, len(line))
	}
	return n
}

// foldSubject returns the Subject header's value for s (one line of words
// separated by single spaces): plain ASCII folded between words into
// lines of at most 78 characters, or, when s is not printable ASCII, could
// be read as an encoded-word or holds a word too long for a line, RFC 2047
// encoded-words of at most 75 characters, a line each.
func foldSubject(s string) string {
	const name = len("Subject: ")
	words := strings.Split(s, " ")
	plain := !strings.Contains(s, "=?")
	for _, word := range words {
		if len(word) > maxHeaderLine-1 {
			plain = false
		}
		for i := 0; i < len(word); i++ {
			if word[i] <= ' ' || word[i] > '~' {
				plain = false
			}
		}
	}
	if !plain {
		return strings.Join(encodeWords(s), "\r\n ")
	}
	var b strings.Builder
	n := name
	for i, word := range words {
		if i > 0 {
			if n+1+len(word) > maxHeaderLine {
				b.WriteString("\r\n")
				n = 0
			}
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// encodeWords returns s as RFC 2047 "Q" encoded-words in UTF-8 of at most
// 75 characters each, split between characters. Readers join adjacent
// encoded-words without the white space between them.
func encodeWords(s string) []string {
	const open, end, most = "=?utf-8?q?", "?=", 75
	var words []string
	var cur strings.Builder
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		var enc []byte
		for _, c := range []byte(s[i : i+size]) {
			switch {
			case c == ' ':
				enc = append(enc, '_')
			case c > ' ' && c <= '~' && c != '=' && c != '?' && c != '_':
				enc = append(enc, c)
			default:
				enc = fmt.Appendf(enc, "=%02X", c)
			}
		}
		if cur.Len() > 0 && len(open)+cur.Len()+len(enc)+len(end) > most {
			words = append(words, open+cur.String()+end)
			cur.Reset()
		}
		cur.Write(enc)
		i += size
	}
	return append(words, open+cur.String()+end)
}
