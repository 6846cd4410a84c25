package deliver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/netguard"
	"github.com/vigil-run/vigil/internal/proc"
)

// Bounds of the delivery options.
const (
	MaxURL = 2048
	// SecretPrefix starts every webhook secret; the rest is the base64 of
	// 24 to 64 random bytes (Standard Webhooks).
	SecretPrefix   = "whsec_"
	MinSecretBytes = 24
	MaxSecretBytes = 64
	// DefaultCommandTimeout bounds a delivery command; MaxCommandTimeout
	// is the most a watch may ask for.
	DefaultCommandTimeout = 60 * time.Second
	MaxCommandTimeout     = 10 * time.Minute
	MaxEmail              = 254
	// Redacted replaces a secret wherever options are shown.
	Redacted = SecretPrefix + "…redacted"
)

// When a delivery command runs (CommandOptions.On).
const (
	OnAny  = "any"  // every outcome: fired, failed, errored, expired
	OnDone = "done" // the watch fired
	OnFail = "fail" // the watch failed, errored or expired
)

// MaxCommands is how many delivery commands a watch may carry: one for
// each outcome class (OnDone and OnFail).
const MaxCommands = 2

// Options are a watch's delivery options (the "deliver" field of a
// registration), in their canonical form:
//
//	{"webhook": {"url", "secret"?, "retry_unknown"?},
//	 "command": {"argv" | "shell", "cwd"?, "env"?, "on"?, "timeout"?}
//	            | [ {…, "on": "done"}, {…, "on": "fail"} ],
//	 "email": {"to"},
//	 "resume": {"harness", "session" | "argv", "cwd"?, "env"?, "on"?, "timeout"?},
//	 "progress": bool}
type Options struct {
	Webhook  *WebhookOptions `json:"webhook,omitempty"`
	Command  Commands        `json:"command,omitempty"`
	Email    *EmailOptions   `json:"email,omitempty"`
	Resume   *ResumeOptions  `json:"resume,omitempty"`
	Progress bool            `json:"progress,omitempty"`
}

// WebhookOptions send the outcome to a URL.
type WebhookOptions struct {
	URL string `json:"url"`
	// Secret signs the request; empty means the daemon's own secret.
	Secret string `json:"secret,omitempty"`
	// RetryUnknown resends (same webhook-id) after a timeout that may have
	// landed. Off by default: a receiver gets at most one copy.
	RetryUnknown bool `json:"retry_unknown,omitempty"`
}

// CommandOptions run a program with the outcome on stdin.
type CommandOptions struct {
	proc.Program
	// On is when it runs: OnAny (default), OnDone or OnFail.
	On string `json:"on,omitempty"`
	// Timeout bounds the run (default DefaultCommandTimeout).
	Timeout string `json:"timeout,omitempty"`
}

// Commands are a watch's delivery commands: one, or two whose outcome
// classes do not overlap (an on-done and an on-fail command), so that at
// most one runs for any outcome and its receipt is the command receipt.
// In JSON one is an object and two an array.
type Commands []CommandOptions

// For returns the command that runs for an outcome state, or nil.
func (cs Commands) For(s vigil.State) *CommandOptions {
	for i := range cs {
		if cs[i].Runs(s) {
			return &cs[i]
		}
	}
	return nil
}

// MarshalJSON writes one command as an object, more as an array.
func (cs Commands) MarshalJSON() ([]byte, error) {
	if len(cs) == 1 {
		return json.Marshal(cs[0])
	}
	return json.Marshal([]CommandOptions(cs))
}

// UnmarshalJSON reads an object (one command) or an array of them.
func (cs *Commands) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '[' {
		var list []CommandOptions
		if err := strictDecode(t, &list); err != nil {
			return err
		}
		if list == nil {
			list = []CommandOptions{}
		}
		*cs = list
		return nil
	}
	if string(t) == "null" {
		*cs = nil
		return nil
	}
	var one CommandOptions
	if err := strictDecode(t, &one); err != nil {
		return err
	}
	*cs = Commands{one}
	return nil
}

// strictDecode decodes b into v, refusing unknown fields as ParseOptions
// does (a custom decoder does not inherit the caller's setting).
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// EmailOptions mail fired and failed outcomes to an address.
type EmailOptions struct {
	To string `json:"to"`
}

// Policy is what this daemon allows and has configured; it decides which
// delivery options a registration may carry (admission, SPEC §2.1).
type Policy struct {
	// AllowExec allows command delivery (--allow-exec).
	AllowExec bool
	// SMTP is true when the daemon has an SMTP host (smtp.host).
	SMTP bool
	// Guard is the probe target policy: a webhook URL whose host is a
	// literal address it refuses (a metadata address; a private one under
	// deny_private) is refused at registration. Names are checked when
	// the webhook dials.
	Guard netguard.Guard
}

// ParseOptions decodes stored (canonical) options. Empty means none.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, err
	}
	return o, nil
}

func invalid(field, format string, args ...any) error {
	return vigil.FieldErrorf(vigil.CodeInvalidRequest, field, field+" "+format, args...)
}

// Canonicalize validates a registration's delivery options strictly and
// returns their canonical JSON (nil for none). scopeExec says whether the
// caller's token carries the exec scope (the admin's always does).
// Refusals: invalid_request naming the field; watch_unobservable naming
// the setting for a channel this daemon cannot run; unauthorized for a
// command without the exec scope.
func (p Policy) Canonicalize(raw json.RawMessage, scopeExec bool) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || string(t) == "{}" {
		return nil, nil
	}
	if err := foldedTwice(t, "deliver", 0); err != nil {
		return nil, err
	}
	o, err := ParseOptions(t)
	if err != nil {
		return nil, invalid("deliver", "must be an object with webhook, command, email, resume and progress: %s", decodeMessage(err))
	}
	if w := o.Webhook; w != nil {
		if err := checkWebhook(w); err != nil {
			return nil, err
		}
		if u, err := url.Parse(w.URL); err == nil {
			if err := p.Guard.Admit(u.Hostname()); err != nil {
				return nil, vigil.FieldErrorf(vigil.CodeWatchUnobservable, "deliver.webhook.url", "%s", vigil.ErrorMessage(err))
			}
		}
	}
	if o.Command != nil {
		if err := p.checkCommands(o.Command, scopeExec); err != nil {
			return nil, err
		}
	}
	if e := o.Email; e != nil {
		addr, err := mail.ParseAddress(e.To)
		switch {
		case len(e.To) > MaxEmail || err != nil || addr.Name != "" || addr.Address != strings.TrimSpace(e.To):
			return nil, invalid("deliver.email.to", "must be one plain email address like ops@example.com")
		case !p.SMTP:
			return nil, vigil.FieldErrorf(vigil.CodeWatchUnobservable, "deliver.email",
				"email delivery needs an SMTP server: set smtp.host (VIGIL_SMTP_HOST) in the daemon's configuration")
		}
		e.To = addr.Address
	}
	if o.Resume != nil {
		if err := p.checkResume(o.Resume, scopeExec); err != nil {
			return nil, err
		}
	}
	if o.Webhook == nil && o.Command == nil && o.Email == nil && o.Resume == nil && !o.Progress {
		return nil, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return vigil.CanonicalJSON(b)
}

// foldedTwice refuses an object of the options (the options, a channel's,
// each of a command list's) naming one field twice in two spellings that
// differ only in case ("webhook" and "Webhook"): encoding/json matches a
// key to a field ignoring case, and the last one would win without a word
// (one webhook, or one session to wake, dropped). Maps (env) are not
// fields, and their keys are left as they are.
func foldedTwice(raw json.RawMessage, field string, depth int) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // not an object: decoding says so
	}
	keys := slices.Sorted(maps.Keys(m))
	seen := make(map[string]string, len(keys))
	for _, k := range keys {
		f := strings.ToLower(strings.ToUpper(k)) // as encoding/json folds
		if other, ok := seen[f]; ok {
			return invalid(field+"."+k, "is given twice, also as %q (fields are matched ignoring case)", other)
		}
		seen[f] = k
		if depth > 0 {
			continue
		}
		v := bytes.TrimSpace(m[k])
		switch {
		case len(v) > 0 && v[0] == '{':
			if err := foldedTwice(v, field+"."+f, 1); err != nil {
				return err
			}
		case len(v) > 0 && v[0] == '[':
			var items []json.RawMessage
			if json.Unmarshal(v, &items) == nil {
				for i, it := range items {
					if err := foldedTwice(it, fmt.Sprintf("%s.%s[%d]", field, f, i), 1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// decodeMessage is a JSON decoding error without anything from the input
// but field names.
func decodeMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s has the wrong type", te.Field)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field") {
		return strings.TrimPrefix(msg, "json: ")
	}
	return "not valid JSON"
}

func checkWebhook(w *WebhookOptions) error {
	if len(w.URL) > MaxURL {
		return invalid("deliver.webhook.url", "is longer than %d bytes", MaxURL)
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return invalid("deliver.webhook.url", "must be an absolute http:// or https:// URL")
	}
	if u.Fragment != "" {
		return invalid("deliver.webhook.url", "must not have a #fragment")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	w.URL = u.String()
	if w.Secret != "" {
		if _, err := SecretKey(w.Secret); err != nil {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "deliver.webhook.secret", "deliver.webhook.secret %v", err)
		}
	}
	return nil
}

// SecretKey returns the HMAC key of a "whsec_…" secret: the bytes its
// base64 spells. The error never quotes the secret.
func SecretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("must start with %q followed by base64", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("must be %q followed by standard base64", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("must hold %d to %d bytes of key after %q", MinSecretBytes, MaxSecretBytes, SecretPrefix)
	}
	return key, nil
}

// checkCommands checks each command, and that at most one runs for any
// outcome.
func (p Policy) checkCommands(cs Commands, scopeExec bool) error {
	if len(cs) == 0 || len(cs) > MaxCommands {
		return invalid("deliver.command", "must be one command, or an array of an on-done and an on-fail command")
	}
	for i := range cs {
		if err := p.checkCommand(&cs[i], scopeExec); err != nil {
			return err
		}
	}
	for _, s := range []vigil.State{vigil.StateFired, vigil.StateFailed, vigil.StateErrored, vigil.StateExpired} {
		n := 0
		for i := range cs {
			if cs[i].Runs(s) {
				n++
			}
		}
		if n > 1 {
			return invalid("deliver.command", "has two commands for a %s outcome: give at most one with \"on\": %q and one with \"on\": %q", s, OnDone, OnFail)
		}
	}
	return nil
}

func (p Policy) checkCommand(c *CommandOptions, scopeExec bool) error {
	if err := c.Program.Check("deliver.command"); err != nil {
		var ve *vigil.Error
		if errors.As(err, &ve) {
			field := strings.TrimPrefix(ve.Field, "predicate.")
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, field, "%s", strings.Replace(ve.Message, "predicate.", "", 1))
		}
		return invalid("deliver.command", "%v", err)
	}
	return checkExec(execRule{field: "deliver.command", name: "command", runs: "a program",
		def: DefaultCommandTimeout, max: MaxCommandTimeout}, &c.On, &c.Timeout, p, scopeExec)
}

// execRule names an exec delivery channel for checkExec: its field, its
// name and what it runs, in the sentences of its refusals, and its
// timeout's default and bound.
type execRule struct {
	field, name, runs string
	def, max          time.Duration
}

// checkExec holds the rules the exec delivery channels (command, resume)
// share: on defaults to any; the timeout defaults to r.def and is bounded
// by r.max, and is written back in its canonical form; the daemon must
// allow exec and the token must carry the exec scope.
func checkExec(r execRule, on, timeout *string, p Policy, scopeExec bool) error {
	switch *on {
	case "":
		*on = OnAny
	case OnAny, OnDone, OnFail:
	default:
		return invalid(r.field+".on", "must be %q, %q or %q", OnDone, OnFail, OnAny)
	}
	d := r.def
	if *timeout != "" {
		t, err := vigil.ParseDuration(*timeout)
		if err != nil || t <= 0 || t > r.max {
			return invalid(r.field+".timeout", "must be a duration above 0 and at most %s", vigil.FormatDuration(r.max))
		}
		d = t
	}
	*timeout = vigil.FormatDuration(d)
	if !p.AllowExec {
		return vigil.FieldErrorf(vigil.CodeWatchUnobservable, r.field,
			"%s delivery runs %s, and this daemon does not allow that: start it with --allow-exec (VIGIL_ALLOW_EXEC=1)", r.name, r.runs)
	}
	if !scopeExec {
		return vigil.FieldErrorf(vigil.CodeForbidden, r.field, "this token does not carry the exec scope that %s delivery needs", r.name)
	}
	return nil
}

// CommandTimeout is the run bound of canonical command options.
func (c *CommandOptions) CommandTimeout() time.Duration {
	if d, err := vigil.ParseDuration(c.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultCommandTimeout
}

// Runs reports whether the command runs for an outcome state: OnDone for
// fired, OnFail for failed, errored and expired (to whoever waits on a
// long task, a timeout is a failure), OnAny for all four. A cancellation
// is never pushed.
func (c *CommandOptions) Runs(s vigil.State) bool {
	switch c.On {
	case OnDone:
		return s == vigil.StateFired
	case OnFail:
		return s == vigil.StateFailed || s == vigil.StateErrored || s == vigil.StateExpired
	}
	return s != vigil.StateCancelled
}

// RunsFor names the outcome states the command runs for, for a person:
// "fired", "failed, errored or expired".
func (c *CommandOptions) RunsFor() string {
	switch c.On {
	case OnDone:
		return "fired"
	case OnFail:
		return "failed, errored or expired"
	}
	return "fired, failed, errored or expired"
}

// Redact returns delivery options as they may be shown: webhook secrets
// replaced by Redacted and a URL's credentials removed. Anything that does
// not parse is hidden whole.
func Redact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	o, err := ParseOptions(raw)
	if err != nil {
		return json.RawMessage(`{"redacted":true}`)
	}
	if w := o.Webhook; w != nil {
		if w.Secret != "" {
			w.Secret = Redacted
		}
		w.URL = RedactURL(w.URL)
	}
	for _, c := range o.Command {
		for k := range c.Env {
			c.Env[k] = "…redacted"
		}
	}
	if r := o.Resume; r != nil {
		for k := range r.Env {
			r.Env[k] = "…redacted"
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		return json.RawMessage(`{"redacted":true}`)
	}
	c, err := vigil.CanonicalJSON(b)
	if err != nil {
		return b
	}
	return c
}

// RedactURL removes a URL's credentials (user and password) and the
// values of its secret-named query parameters (a token, as a predicate's
// URL shows it: vigil.RedactURL).
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "…redacted"
	}
	if u.User != nil {
		u.User = url.User("…redacted")
	}
	return vigil.RedactURL(u.String())
}
