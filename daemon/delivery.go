package daemon

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/internal/netguard"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/store/postgres"
)

// WebhookSecretFile holds the daemon's own webhook signing secrets, one
// "whsec_…" per line (mode 0600); each signs, so a receiver can move from
// one to the next. Written on the first start.
const WebhookSecretFile = "webhook.secret"

// SMTPConfig is the SMTP server email delivery sends through (smtp.*).
// Without a Host, email delivery is refused at registration.
type SMTPConfig struct {
	Host string
	// Port; zero means DefaultSMTPPort.
	Port     int
	User     string
	Password string
	From     string
	// NoStartTLS sends without STARTTLS (smtp.starttls=false); the
	// default requires it.
	NoStartTLS bool
	// TLS speaks TLS from the connection's first byte (smtp.tls: implicit
	// TLS, RFC 8314, "SMTPS"); nil means on for port 465 alone.
	TLS *bool
}

// SMTPSPort is the port of SMTP submission over implicit TLS (RFC 8314).
const SMTPSPort = 465

// implicitTLS reports whether the connection speaks TLS from its first
// byte: smtp.tls as given, else whether the port is 465.
func (s SMTPConfig) implicitTLS() bool {
	if s.TLS != nil {
		return *s.TLS
	}
	return s.port() == SMTPSPort
}

// DefaultSMTPPort is the SMTP submission port.
const DefaultSMTPPort = 587

func (s SMTPConfig) port() int {
	if s.Port == 0 {
		return DefaultSMTPPort
	}
	return s.Port
}

// DeliveryConfig configures push delivery.
type DeliveryConfig struct {
	SMTP SMTPConfig
	// Webhooks are default webhooks by recipient: a watch of the recipient
	// that names no webhook is posted to this URL (webhooks,
	// "RECIPIENT=URL,…").
	Webhooks map[string]string
	// WebhookSecrets are signing secrets by recipient (webhook_secrets,
	// "RECIPIENT=whsec_…,…"): they sign the recipient's webhooks that give
	// no secret of their own, instead of the daemon's.
	WebhookSecrets map[string]string
	// PublicURL is the base URL people and mail providers reach this
	// daemon at (public_url): the one-click unsubscribe links of delivery
	// mails start with it. Empty means http:// and the listen address,
	// which only works on this machine.
	PublicURL string
}

// Validate names the first delivery setting that cannot work; it never
// shows the SMTP password.
func (c DeliveryConfig) Validate() error {
	s := c.SMTP
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("smtp.port %d: must be from 1 to 65535", s.Port)
	}
	// The host alone: the port is smtp.port, and both are joined to dial.
	if s.Host != "" && !validHostName(s.Host) {
		return fmt.Errorf("smtp.host %q: must be a host name or an IP address alone (no scheme or port: the port is smtp.port), like smtp.example.com", s.Host)
	}
	// net/smtp sends the password (AUTH PLAIN) over TLS, or over plain
	// text to these names alone; it refuses any other, and every mail with
	// it.
	if s.TLS != nil && !*s.TLS && s.port() == SMTPSPort {
		return fmt.Errorf("smtp.tls false: smtp.port %d is SMTP over implicit TLS (RFC 8314), which speaks TLS from the first byte: leave smtp.tls unset or true, or use port %d with smtp.starttls", SMTPSPort, DefaultSMTPPort)
	}
	if s.User != "" && s.NoStartTLS && !s.implicitTLS() && s.Host != "" && s.Host != "localhost" && s.Host != "127.0.0.1" && s.Host != "::1" {
		return fmt.Errorf("smtp.user %q: a password is sent only over STARTTLS or to localhost, and smtp.starttls is off for %s: turn smtp.starttls or smtp.tls on, or leave smtp.user empty for a relay that needs none", s.User, s.Host)
	}
	if s.Password != "" && s.User == "" {
		return errors.New("smtp.password is set but smtp.user is empty, so it would never be sent: set smtp.user (VIGIL_SMTP_USER) too, or leave both empty")
	}
	if s.From != "" {
		// Exactly the address: it goes as written into MAIL FROM:<…> and
		// the From header ("<v@x>" or "\"v\"@x" parse, but are refused
		// there).
		if a, err := mail.ParseAddress(s.From); err != nil || a.Name != "" || a.Address != s.From {
			return fmt.Errorf("smtp.from %q: must be one plain email address", s.From)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return errors.New("public_url: must be an absolute http:// or https:// URL with no credentials, query or fragment, like https://vigil.example.com")
		}
	}
	if s.Host == "" && (s.User != "" || s.Password != "" || s.From != "") {
		return errors.New("smtp.host is empty but other smtp settings are given: set smtp.host (VIGIL_SMTP_HOST) to send email")
	}
	for r, u := range c.Webhooks {
		if err := vigil.ValidName("webhooks", r, 256); err != nil {
			return fmt.Errorf("webhooks: recipient %q is not a valid recipient name", r)
		}
		if _, err := (deliver.Policy{}).Canonicalize([]byte(`{"webhook":{"url":`+strconv.Quote(u)+`}}`), true); err != nil {
			return fmt.Errorf("webhooks: the URL for %s must be an absolute http:// or https:// URL", r)
		}
	}
	for r, sec := range c.WebhookSecrets {
		if err := vigil.ValidName("webhook_secrets", r, 256); err != nil {
			return fmt.Errorf("webhook_secrets: recipient %q is not a valid recipient name", r)
		}
		if _, err := deliver.SecretKey(sec); err != nil {
			return fmt.Errorf("webhook_secrets: the secret for %s %v", r, err)
		}
	}
	return nil
}

// deliveryKeys are the smtp.* keys and webhooks.
func deliveryKeys() []key {
	str := func(name, usage string, field func(c *Config) *string) key {
		flag := strings.ReplaceAll(name, ".", "-")
		return key{name: name, flagName: flag, envName: "VIGIL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")), usage: usage, typ: "string",
			set:  func(c *Config, s string) error { *field(c) = strings.TrimSpace(s); return nil },
			show: func(c Config) string { return *field(&c) }}
	}
	return []key{
		str("smtp.host", "SMTP server for email delivery; empty turns email delivery off", func(c *Config) *string { return &c.Delivery.SMTP.Host }),
		{name: "smtp.port", flagName: "smtp-port", envName: "VIGIL_SMTP_PORT", usage: "SMTP server port", typ: "int",
			set: func(c *Config, s string) error {
				n, err := strconv.Atoi(s)
				if err != nil {
					return fmt.Errorf("%q is not a whole number", s)
				}
				c.Delivery.SMTP.Port = n
				return nil
			},
			show: func(c Config) string { return strconv.Itoa(c.Delivery.SMTP.port()) }},
		str("smtp.user", "SMTP user name (empty: no authentication)", func(c *Config) *string { return &c.Delivery.SMTP.User }),
		{name: "smtp.password", flagName: "smtp-password", envName: "VIGIL_SMTP_PASSWORD", typ: "secret",
			usage: "SMTP password (prefer the environment or the config file: a flag shows in the process list)",
			set:   func(c *Config, s string) error { c.Delivery.SMTP.Password = s; return nil },
			show: func(c Config) string {
				if c.Delivery.SMTP.Password != "" {
					return "[redacted]"
				}
				return ""
			}},
		str("smtp.from", "sender address of delivery emails (default vigil@HOST)", func(c *Config) *string { return &c.Delivery.SMTP.From }),
		{name: "smtp.starttls", flagName: "smtp-starttls", envName: "VIGIL_SMTP_STARTTLS", bool: true,
			usage: "require STARTTLS before sending (turn off only for a local relay)",
			set: func(c *Config, s string) error {
				b, err := strconv.ParseBool(s)
				if err != nil {
					return fmt.Errorf("%q is not true or false", s)
				}
				c.Delivery.SMTP.NoStartTLS = !b
				return nil
			},
			show: func(c Config) string { return strconv.FormatBool(!c.Delivery.SMTP.NoStartTLS) }},
		{name: "smtp.tls", flagName: "smtp-tls", envName: "VIGIL_SMTP_TLS", bool: true,
			usage: "speak TLS from the first byte (implicit TLS, \"SMTPS\"; default true on port 465 alone) instead of STARTTLS",
			set: func(c *Config, s string) error {
				b, err := strconv.ParseBool(s)
				if err != nil {
					return fmt.Errorf("%q is not true or false", s)
				}
				c.Delivery.SMTP.TLS = &b
				return nil
			},
			show: func(c Config) string { return strconv.FormatBool(c.Delivery.SMTP.implicitTLS()) }},
		{name: "public_url", flagName: "public-url", envName: "VIGIL_PUBLIC_URL", typ: "url",
			usage: "base URL people and mail providers reach this daemon at, for the unsubscribe links of delivery emails (default http://LISTEN)",
			set:   func(c *Config, s string) error { c.Delivery.PublicURL = strings.TrimSpace(s); return nil },
			show:  func(c Config) string { return c.Delivery.PublicURL }},
		{name: "webhooks", usage: "default webhooks by recipient, RECIPIENT=URL separated by commas", typ: "list",
			set: func(c *Config, s string) error { return setWebhooks(c, strings.Split(s, ",")) },
			list: func(c *Config, v []string) error {
				return setWebhooks(c, v)
			},
			show: func(c Config) string {
				var out []string
				for r, u := range c.Delivery.Webhooks {
					out = append(out, r+"="+deliver.RedactURL(u))
				}
				sort.Strings(out)
				return strings.Join(out, ",")
			}},
		{name: "webhook_secrets", usage: "webhook signing secrets by recipient, RECIPIENT=whsec_… separated by commas (prefer the environment or the config file)", typ: "secret",
			set: func(c *Config, s string) error {
				return setPairs(&c.Delivery.WebhookSecrets, strings.Split(s, ","), "RECIPIENT=whsec_…")
			},
			list: func(c *Config, v []string) error {
				return setPairs(&c.Delivery.WebhookSecrets, v, "RECIPIENT=whsec_…")
			},
			show: func(c Config) string {
				var out []string
				for r := range c.Delivery.WebhookSecrets {
					out = append(out, r+"=[redacted]")
				}
				sort.Strings(out)
				return strings.Join(out, ",")
			}},
	}
}

func setWebhooks(c *Config, items []string) error {
	return setPairs(&c.Delivery.Webhooks, items, "RECIPIENT=URL")
}

// setPairs reads RECIPIENT=VALUE entries into *m; the error never quotes
// a value.
func setPairs(m *map[string]string, items []string, form string) error {
	*m = nil
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		r, v, ok := strings.Cut(it, "=")
		if !ok || strings.TrimSpace(r) == "" || strings.TrimSpace(v) == "" {
			return errors.New("each entry must be " + form)
		}
		if *m == nil {
			*m = map[string]string{}
		}
		r = strings.TrimSpace(r)
		if _, dup := (*m)[r]; dup {
			// Keeping the last would drop the first without a word.
			return fmt.Errorf("recipient %q is given twice: give each recipient one entry", r)
		}
		(*m)[r] = strings.TrimSpace(v)
	}
	return nil
}

// ensureWebhookSecrets returns the daemon's webhook secrets from
// <dataDir>/webhook.secret, writing a new one (mode 0600) on the first
// start. Blank lines and lines starting with # are skipped.
func ensureWebhookSecrets(dataDir string, log *slog.Logger) ([]string, error) {
	path := filepath.Join(dataDir, WebhookSecretFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		s := deliver.SecretPrefix + base64.StdEncoding.EncodeToString(key)
		err := writeNewFile(path, s+"\n")
		if errors.Is(err, fs.ErrExist) {
			return ensureWebhookSecrets(dataDir, log)
		}
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		log.Info("wrote the webhook signing secret", "path", path)
		return []string{s}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := deliver.SecretKey(line); err != nil {
			return nil, fmt.Errorf("webhook secret %s line %d %v", path, i+1, err)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("webhook secret %s holds no secret; delete it and restart vigil to make a new one", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("webhook secret %s is readable by others and could not be made private: %w", path, err)
		}
		log.Warn("the webhook secret file was readable by others; made it private (0600)", "path", path)
	}
	return out, nil
}

// LinkKeyFile holds the key that signs the one-click unsubscribe links of
// delivery mails (mode 0600), written on the first start. Only the daemon
// holds it: a webhook receiver, which holds the webhook secret, cannot
// make a link. Replacing it makes the links in mails already sent stop
// working.
const LinkKeyFile = "link.key"

// ensureLinkKey returns the link key in <dataDir>/link.key, writing a new
// random one (mode 0600) on the first start.
func ensureLinkKey(dataDir string, log *slog.Logger) ([]byte, error) {
	path := filepath.Join(dataDir, LinkKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("link key: %w", err)
		}
		err := writeNewFile(path, base64.StdEncoding.EncodeToString(key)+"\n")
		if errors.Is(err, fs.ErrExist) {
			return ensureLinkKey(dataDir, log)
		}
		if err != nil {
			return nil, fmt.Errorf("link key: %w", err)
		}
		log.Info("wrote the key of email unsubscribe links", "path", path)
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("link key %s is not the base64 of at least 16 bytes; delete it and restart vigil to make a new one (links in mails already sent stop working)", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("link key %s is readable by others and could not be made private: %w", path, err)
		}
		log.Warn("the link key file was readable by others; made it private (0600)", "path", path)
	}
	return key, nil
}

// writeNewFile writes text into a new file at path (0600), whole or not at
// all: into a temporary file beside it, synced, then linked into place, so
// a start killed at any instant leaves no file or the whole one, never an
// empty one the next start would refuse (the admin token, the webhook
// secrets, the link key). It answers fs.ErrExist when another start made
// path first.
func writeNewFile(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(text)
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if createHook != nil {
		createHook(filepath.Base(path))
	}
	return os.Link(tmp.Name(), path)
}

// newDispatcher wires the push channels explicitly: webhook always (signed
// with the daemon's secrets, read by ensureWebhookSecrets, unless a watch
// or its recipient gives its own), command and resume when
// exec is allowed, email when an SMTP host is set (each mail with its
// signed unsubscribe link, and access re-checked before it leaves).
func newDispatcher(cfg Config, store vigil.Store, secrets []string, log *slog.Logger, receipt func(channel, status string),
	links *email.Links, access func(ctx context.Context, w *vigil.Watch) error) (*deliver.Dispatcher, deliver.Policy, error) {
	wh, err := webhook.New(webhook.Config{Secrets: secrets, DenyPrivate: cfg.DenyPrivate})
	if err != nil {
		return nil, deliver.Policy{}, err
	}
	chans := map[string]deliver.Channel{deliver.ChannelWebhook: wh}
	policy := deliver.Policy{AllowExec: cfg.AllowExec, SMTP: cfg.Delivery.SMTP.Host != "", Guard: netguard.Guard{DenyPrivate: cfg.DenyPrivate}}
	if policy.AllowExec {
		// Each program runs under the reaper the configuration names
		// (`vigil reap`, a child subreaper on Linux), if it names one, so
		// what the program leaves outside its process group is ended too.
		cc := command.Config{Runner: proc.Runner{Reaper: cfg.Reaper}}
		chans[deliver.ChannelCommand] = command.New(cc)
		rc := cc
		if pg, ok := store.(*postgres.Store); ok {
			// The resumes of one agent session wait for each other
			// across the replicas, not only here.
			rc.Turns = pg
		}
		chans[deliver.ChannelResume] = command.NewResume(rc)
	}
	if s := cfg.Delivery.SMTP; policy.SMTP {
		chans[deliver.ChannelEmail] = email.New(email.Config{Host: s.Host, Port: s.port(), Username: s.User, Password: s.Password,
			From: s.From, StartTLS: !s.NoStartTLS, TLS: s.implicitTLS(), Links: links})
	}
	defaults := make(map[string]deliver.WebhookOptions, len(cfg.Delivery.Webhooks))
	for r, u := range cfg.Delivery.Webhooks {
		defaults[r] = deliver.WebhookOptions{URL: u}
	}
	dc := deliver.Config{Store: store, Channels: chans, RecipientWebhooks: defaults,
		RecipientSecrets: cfg.Delivery.WebhookSecrets, Logger: log,
		ResumeWindow: cfg.Limits.RetentionWatches, ReceiptFunc: receipt, AccessFunc: access, StopGrace: deliveryGrace}
	if pg, ok := store.(*postgres.Store); ok {
		// A replica delivers for the shards it holds only.
		dc.HoldsFunc = pg.Holds
	}
	d := deliver.New(dc)
	return d, policy, nil
}
