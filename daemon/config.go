package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/pflag"

	"github.com/vigil-run/vigil/internal/lease"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/httpapi"
)

// DefaultListen is the address the daemon listens on, and the address
// clients look for it at, unless told otherwise.
const DefaultListen = "127.0.0.1:7474"

// Names of the files the daemon keeps in its data directory.
const (
	// DatabaseFile is the SQLite database, unless store names another.
	DatabaseFile = "vigil.db"
	// TokenFile holds the admin token (mode 0600).
	TokenFile = "admin.token"
)

// EnvConfig names the environment variable that gives a config file when
// --config does not.
const EnvConfig = "VIGIL_CONFIG"

// Config is the daemon's configuration: the keys of SPEC §10 this build
// uses. Build it with DefaultConfig or Load, and check it with Validate.
type Config struct {
	// Listen is the host:port the HTTP API listens on.
	Listen string
	// AllowedHosts are host names (or addresses), besides the listen
	// address and the loopback names, that a request's Host header may
	// name: the daemon's DNS name, a reverse proxy's. Any other Host is
	// refused, against DNS rebinding; an Origin on one of them is trusted.
	AllowedHosts []string
	// DataDir holds the database, the admin token and other state.
	DataDir string
	// Store selects the store: "" (or "sqlite") for the SQLite file
	// vigil.db in DataDir, "sqlite:PATH" for another SQLite file, or a
	// postgres:// (postgresql://) URL for a PostgreSQL database, which
	// several daemons may share (see docs/operations.md).
	Store string
	// AllowExec enables the kinds that run commands.
	AllowExec bool
	// Roots are the directories file and folder watches may look inside.
	Roots []string
	// ProbeWorkers sizes the probe pool.
	ProbeWorkers int
	// DenyPrivate stops http and tcp probes from reaching loopback and
	// private addresses too (link-local and metadata addresses are always
	// refused).
	DenyPrivate bool
	// RegisterRate and RegisterBurst bound each scoped token's
	// registrations, on every surface: a token bucket of RegisterBurst
	// refilled at RegisterRate a second. RegisterRate 0 means no limit.
	RegisterRate  int
	RegisterBurst int
	// MaxStreamsPerToken bounds the long-lived requests (event streams,
	// long-polls, MCP requests) each scoped token may have open at once;
	// 0 means no bound. The admin token is not bounded.
	MaxStreamsPerToken int
	// Limits are the engine's bounds; min_every, max_deadline, max_active
	// and max_active_per_recipient are configurable keys.
	Limits vigil.Limits
	// DefaultRecipient is the recipient the MCP tools at /mcp act for when
	// neither a call nor its connection names one; empty means none.
	DefaultRecipient string
	// Forges are the providers ci and ticket watches read: per provider
	// an API base URL (empty leaves it unconfigured) and a token.
	Forges forge.Settings
	// Delivery configures push delivery: the SMTP server and default
	// webhooks by recipient.
	Delivery DeliveryConfig
	// Lease and LeaseRenew are, on PostgreSQL, how long a replica's hold
	// on a shard lasts without renewal and how often it renews (see
	// docs/operations.md, "Running replicas"). Zero means the defaults
	// (15 s; a third of the lease, at most 5 s).
	Lease, LeaseRenew time.Duration
	// Replica is this daemon's id among the replicas on one PostgreSQL
	// database; empty means host:pid (ReplicaID). Two live replicas must
	// not share one.
	Replica string
	// ShutdownDrain is how long, once a shutdown begins, the daemon goes
	// on accepting and serving requests while /readyz answers 503, so
	// that a load balancer probing it stops routing to it before its
	// listener closes; 0 closes the listener at once. At most
	// maxShutdownDrain.
	ShutdownDrain time.Duration
	// Reaper, when set, is the argv of a program that serves vigil's
	// hidden `reap` command (the vigil binary's own [exe, "reap"], which
	// `vigil serve` sets; or a vigil binary of this version): each
	// command and resume delivery's program
	// runs under it, a child subreaper on Linux, so that what the program
	// started and left outside its process group (setsid, a daemon) is
	// killed with it. Nil, as a program that embeds the daemon has it
	// unless it sets it, starts each program directly: only its process
	// group is ended. It is not a setting of the configuration file.
	Reaper []string
}

// maxShutdownDrain bounds shutdown_drain: it adds to the time a shutdown
// takes, which a supervisor's stop timeout must cover.
const maxShutdownDrain = time.Minute

// DefaultConfig returns the defaults of SPEC §10 for the current user.
func DefaultConfig() Config { return defaultConfig(os.Getenv) }

func defaultConfig(getenv func(string) string) Config {
	home := homeDir(getenv)
	var roots []string
	if home != "" {
		roots = []string{home}
	}
	return Config{
		Listen:       DefaultListen,
		DataDir:      DefaultDataDir(getenv),
		ProbeWorkers: engine.DefaultWorkers,
		Roots:        roots,
		// The limit's numbers live in httpapi; these are their defaults.
		RegisterRate:       int(httpapi.DefaultRegisterRate),
		RegisterBurst:      httpapi.DefaultRegisterBurst,
		MaxStreamsPerToken: httpapi.DefaultMaxLongCalls,
		Limits:             vigil.DefaultLimits(),
		Forges:             forge.DefaultSettings(),
	}
}

// DefaultDataDir returns $XDG_DATA_HOME/vigil, or ~/.local/share/vigil,
// reading the environment through getenv (nil means os.Getenv). It returns
// "" when neither variable nor a home directory is known.
func DefaultDataDir(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if x := getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "vigil")
	}
	if home := homeDir(getenv); home != "" {
		return filepath.Join(home, ".local", "share", "vigil")
	}
	return ""
}

func homeDir(getenv func(string) string) string {
	if h := getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// DatabasePath returns the SQLite file the configuration names.
func (c Config) DatabasePath() string {
	if p, ok := strings.CutPrefix(c.Store, "sqlite:"); ok && p != "" {
		return p
	}
	return filepath.Join(c.DataDir, DatabaseFile)
}

// TokenPath returns the admin token file in dataDir.
func TokenPath(dataDir string) string { return filepath.Join(dataDir, TokenFile) }

// StoreName describes the store for the start-up line: "sqlite:/path", or
// the PostgreSQL URL without its credentials.
func (c Config) StoreName() string {
	if c.Postgres() {
		return redactURL(c.Store)
	}
	return "sqlite:" + c.DatabasePath()
}

// StoreKind names the kind of store: StoreSQLite or StorePostgres.
func (c Config) StoreKind() string {
	if c.Postgres() {
		return StorePostgres
	}
	return StoreSQLite
}

// The kinds of store StoreKind names.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Postgres reports whether the store is a PostgreSQL URL.
func (c Config) Postgres() bool {
	return strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://")
}

// Validate reports the first setting that cannot work, as one sentence
// naming the key.
func (c Config) Validate() error {
	// An empty host listens on every interface: allowed, if asked for.
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: want host:port, like %s", c.Listen, DefaultListen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("listen %q: the port must be a number from 0 to 65535", c.Listen)
	}
	for _, h := range c.AllowedHosts {
		if !validHostName(h) {
			return fmt.Errorf("allowed_hosts: %q is not a host name or an IP address (give the name alone: no scheme, port, path or wildcard)", h)
		}
	}
	if c.DataDir == "" {
		return errors.New("data_dir is not set and there is no home directory to default to; set --data-dir or VIGIL_DATA_DIR")
	}
	if !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("data_dir %q must be an absolute path", c.DataDir)
	}
	switch s := c.Store; {
	case s == "", s == "sqlite":
	case strings.HasPrefix(s, "sqlite:"):
		if p := strings.TrimPrefix(s, "sqlite:"); !filepath.IsAbs(p) {
			return fmt.Errorf("store %q: the SQLite file must be an absolute path", s)
		}
	case c.Postgres():
		if _, err := pgconn.ParseConfig(s); err != nil {
			// The parser's message holds the URL, password included.
			return fmt.Errorf("store %q: not a PostgreSQL URL that parses; give postgres://user@host:port/database?sslmode=…", redactURL(s))
		}
	default:
		return fmt.Errorf("store %q: leave it empty for SQLite in data_dir, or give sqlite:PATH or a postgres:// URL", redactURL(s))
	}
	if len(c.Roots) == 0 {
		return errors.New("roots is empty: name at least one directory file and folder watches may look inside (VIGIL_ROOTS, colon-separated)")
	}
	for _, r := range c.Roots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("roots: %q must be an absolute path", r)
		}
	}
	if c.Lease < 0 || (c.Lease > 0 && c.Lease < 100*time.Millisecond) || c.Lease > time.Hour {
		return fmt.Errorf("lease %s: must be 0 (15s) or from 100ms to 1h", vigil.FormatDuration(c.Lease))
	}
	// Each renewal runs the lease statements against the database: a
	// shorter interval would run them back to back.
	if c.LeaseRenew < 0 || (c.LeaseRenew > 0 && c.LeaseRenew < minLeaseRenew) {
		return fmt.Errorf("lease_renew %s: must be 0 (a third of the lease, at most 5s) or from %s", vigil.FormatDuration(c.LeaseRenew), vigil.FormatDuration(minLeaseRenew))
	}
	if c.ShutdownDrain < 0 || c.ShutdownDrain > maxShutdownDrain {
		return fmt.Errorf("shutdown_drain %s: must be from 0 (none) to %s", vigil.FormatDuration(c.ShutdownDrain), vigil.FormatDuration(maxShutdownDrain))
	}
	if len(c.Replica) > 200 || strings.IndexFunc(c.Replica, func(r rune) bool { return r < 0x21 || r == 0x7f }) >= 0 {
		return fmt.Errorf("replica %q: at most 200 characters, with no spaces or control characters", c.Replica)
	}
	if lease, renew := c.leases(); renew >= lease {
		return fmt.Errorf("lease_renew %s: must be shorter than the lease (%s)", vigil.FormatDuration(renew), vigil.FormatDuration(lease))
	}
	if c.ProbeWorkers < 1 || c.ProbeWorkers > 1024 {
		return fmt.Errorf("probe_workers %d: must be from 1 to 1024", c.ProbeWorkers)
	}
	if c.RegisterRate < 0 || c.RegisterBurst < 1 {
		return fmt.Errorf("register_rate %d, register_burst %d: the rate must be 0 (no limit) or more, the burst 1 or more", c.RegisterRate, c.RegisterBurst)
	}
	if c.MaxStreamsPerToken < 0 {
		return fmt.Errorf("max_streams_per_token %d: must be 0 (no bound) or more", c.MaxStreamsPerToken)
	}
	l := c.Limits
	if l.MinEvery <= 0 {
		return fmt.Errorf("min_every %s: must be positive", vigil.FormatDuration(l.MinEvery))
	}
	// The scheduler keeps instants as UnixNano (until 2262); a timer may
	// start max_deadline away and end max_deadline after that.
	if l.MaxDeadline > maxMaxDeadline {
		return fmt.Errorf("max_deadline %s: must be at most %s", vigil.FormatDuration(l.MaxDeadline), vigil.FormatDuration(maxMaxDeadline))
	}
	if l.MaxDeadline < l.MinEvery {
		return fmt.Errorf("max_deadline %s: must be at least min_every (%s)", vigil.FormatDuration(l.MaxDeadline), vigil.FormatDuration(l.MinEvery))
	}
	if l.MaxActive < 1 {
		return fmt.Errorf("max_active %d: must be at least 1", l.MaxActive)
	}
	if l.MaxActivePerRecipient < 1 || l.MaxActivePerRecipient > l.MaxActive {
		return fmt.Errorf("max_active_per_recipient %d: must be from 1 to max_active (%d)", l.MaxActivePerRecipient, l.MaxActive)
	}
	if c.DefaultRecipient != "" {
		if err := vigil.ValidName("default_recipient", c.DefaultRecipient, l.MaxNameBytes); err != nil {
			return err
		}
	}
	// The forges' own check names the key and never shows a token.
	if err := c.Forges.Validate(); err != nil {
		return err
	}
	if err := c.Delivery.Validate(); err != nil {
		return err
	}
	return nil
}

// minLeaseRenew is the shortest lease_renew: a third of the shortest
// lease, rounded down.
const minLeaseRenew = 10 * time.Millisecond

// maxMaxDeadline bounds max_deadline: 100 years.
const maxMaxDeadline = 36500 * 24 * time.Hour

// validHostName reports whether s is a DNS host name or an IP address,
// and nothing more.
func validHostName(s string) bool {
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return true
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// redactURL drops credentials from a URL-like string before it is shown:
// the user information, and the value of a query parameter whose name
// holds "password" (a PostgreSQL URL's password= and sslpassword=, which
// pgx reads as libpq does).
func redactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	if j := strings.LastIndex(s, "@"); j > i {
		s = s[:i+3] + "…@" + s[j+1:]
	}
	head, query, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	params := strings.Split(query, "&")
	for n, p := range params {
		k, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if strings.Contains(strings.ToLower(name), "password") {
			params[n] = k + "=…"
		}
	}
	return head + "?" + strings.Join(params, "&")
}

// key is one configuration key: its name in a config file, its flag and
// environment twin, and how a value is read.
type key struct {
	name  string // config file key, snake_case
	usage string
	typ   string // shown in flag help: "int", "duration", …
	bool  bool
	set   func(c *Config, s string) error
	show  func(c Config) string
	// list, when set, reads a JSON array in a config file.
	list func(c *Config, v []string) error
	// envName, when set, is the environment twin instead of VIGIL_NAME.
	envName string
	// flagName, when set, is the flag instead of the key with dashes.
	flagName string
}

// Flag returns the flag name: flagName, else the key with dashes.
func (k key) flag() string {
	if k.flagName != "" {
		return k.flagName
	}
	return strings.ReplaceAll(k.name, "_", "-")
}

// env returns the environment variable: envName, else VIGIL_ and the key
// upper-cased.
func (k key) env() string {
	if k.envName != "" {
		return k.envName
	}
	return "VIGIL_" + strings.ToUpper(k.name)
}

func durationKey(name, usage string, field func(c *Config) *time.Duration) key {
	return key{
		name: name, usage: usage, typ: "duration",
		set: func(c *Config, s string) error {
			d, err := vigil.ParseDuration(s)
			if err != nil {
				return err
			}
			*field(c) = d
			return nil
		},
		show: func(c Config) string { return vigil.FormatDuration(*field(&c)) },
	}
}

func intKey(name, usage string, field func(c *Config) *int) key {
	return key{
		name: name, usage: usage, typ: "int",
		set: func(c *Config, s string) error {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil {
				return fmt.Errorf("%q is not a whole number", s)
			}
			*field(c) = n
			return nil
		},
		show: func(c Config) string { return strconv.Itoa(*field(&c)) },
	}
}

func boolKey(name, usage string, field func(c *Config) *bool) key {
	return key{
		name: name, usage: usage, bool: true,
		set: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("%q is not true or false", s)
			}
			*field(c) = b
			return nil
		},
		show: func(c Config) string { return strconv.FormatBool(*field(&c)) },
	}
}

func stringKey(name, usage string, path bool, field func(c *Config) *string) key {
	return key{
		name: name, usage: usage, typ: "string",
		set: func(c *Config, s string) error {
			if path {
				s = expandPath(s)
			}
			*field(c) = s
			return nil
		},
		show: func(c Config) string { return *field(&c) },
	}
}

// configKeys returns the one table of configuration keys.
func configKeys() []key {
	keys := []key{
		stringKey("listen", "host:port to listen on", false, func(c *Config) *string { return &c.Listen }),
		{
			name: "allowed_hosts", typ: "list",
			usage: "host names, separated by commas, that requests may name in Host besides the listen address and localhost (against DNS rebinding)",
			set: func(c *Config, s string) error {
				c.AllowedHosts = hostList(strings.Split(s, ","))
				return nil
			},
			list: func(c *Config, v []string) error {
				c.AllowedHosts = hostList(v)
				return nil
			},
			show: func(c Config) string { return strings.Join(c.AllowedHosts, ",") },
		},
		stringKey("data_dir", "directory for the database and the admin token", true, func(c *Config) *string { return &c.DataDir }),
		stringKey("store", `store: empty for SQLite in the data dir, sqlite:PATH, or postgres://… for PostgreSQL`, false, func(c *Config) *string { return &c.Store }),
		boolKey("allow_exec", "allow what runs programs: command, run and schedule watches, folder reviewers (on_change), command and resume (--wake) delivery", func(c *Config) *bool { return &c.AllowExec }),
		{
			name: "roots", usage: "colon-separated directories that file and folder watches may look inside", typ: "paths",
			set: func(c *Config, s string) error {
				c.Roots = nil
				for _, r := range filepath.SplitList(s) {
					if r = strings.TrimSpace(r); r != "" {
						c.Roots = append(c.Roots, expandPath(r))
					}
				}
				return nil
			},
			list: func(c *Config, v []string) error {
				c.Roots = nil
				for _, r := range v {
					if r = strings.TrimSpace(r); r != "" {
						c.Roots = append(c.Roots, expandPath(r))
					}
				}
				return nil
			},
			show: func(c Config) string { return strings.Join(c.Roots, string(filepath.ListSeparator)) },
		},
		intKey("probe_workers", "size of the probe worker pool", func(c *Config) *int { return &c.ProbeWorkers }),
		stringKey("replica", "on PostgreSQL, this daemon's id among the replicas of one database (default host:pid)", false, func(c *Config) *string { return &c.Replica }),
		durationKey("lease", "on PostgreSQL, how long a replica keeps its shards without a sign of life: its lease session's idle timeout, or a renewed lease's length (0: 15s)", func(c *Config) *time.Duration { return &c.Lease }),
		durationKey("lease_renew", "on PostgreSQL, how often a replica renews its shards and rebalances (0: a third of the lease, at most 5s)", func(c *Config) *time.Duration { return &c.LeaseRenew }),
		durationKey("shutdown_drain", "how long, once a shutdown begins, the daemon still accepts and serves requests while /readyz answers 503, for a load balancer to stop routing to it (0: none)", func(c *Config) *time.Duration { return &c.ShutdownDrain }),
		durationKey("min_every", "shortest re-check interval a watch may ask for", func(c *Config) *time.Duration { return &c.Limits.MinEvery }),
		durationKey("max_deadline", "longest deadline a watch may ask for", func(c *Config) *time.Duration { return &c.Limits.MaxDeadline }),
		intKey("max_active", "most pending watches in all", func(c *Config) *int { return &c.Limits.MaxActive }),
		intKey("max_active_per_recipient", "most pending watches per recipient", func(c *Config) *int { return &c.Limits.MaxActivePerRecipient }),
		intKey("register_rate", "registrations a second each scoped token may make on average (0: no limit)", func(c *Config) *int { return &c.RegisterRate }),
		intKey("register_burst", "registrations a scoped token may make at once", func(c *Config) *int { return &c.RegisterBurst }),
		intKey("max_streams_per_token", "event streams, long-polls and MCP requests each scoped token may have open at once (0: no bound)", func(c *Config) *int { return &c.MaxStreamsPerToken }),
		boolKey("deny_private", "refuse http and tcp probes to loopback and private addresses", func(c *Config) *bool { return &c.DenyPrivate }),
		{
			// VIGIL_RECIPIENT, as the CLI's --for default.
			name: "default_recipient", envName: "VIGIL_RECIPIENT", typ: "string",
			usage: "recipient the MCP tools at /mcp act for when a call names none",
			set:   func(c *Config, s string) error { c.DefaultRecipient = s; return nil },
			show:  func(c Config) string { return c.DefaultRecipient },
		},
	}
	keys = append(keys, forgeKeys()...)
	return append(keys, deliveryKeys()...)
}

// hostList trims and lower-cases host names, dropping empty ones and an
// IPv6 address's brackets.
func hostList(v []string) []string {
	var out []string
	for _, h := range v {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
				h = ip.String()
			}
			out = append(out, h)
		}
	}
	return out
}

// forgeKeys are forges.PROVIDER.url, forges.PROVIDER.token and
// forges.PROVIDER.login for each provider, with the flags --PROVIDER-url,
// --PROVIDER-token and --PROVIDER-login and the environment twins
// VIGIL_PROVIDER_URL, VIGIL_PROVIDER_TOKEN and VIGIL_PROVIDER_LOGIN
// (SPEC §10).
func forgeKeys() []key {
	endpoint := func(c *Config, p forge.Provider) *forge.Endpoint {
		switch p {
		case forge.Gitea:
			return &c.Forges.Gitea
		case forge.GitLab:
			return &c.Forges.GitLab
		}
		return &c.Forges.GitHub
	}
	what := map[forge.Provider]string{
		forge.GitHub: "API base URL of GitHub, or of GitHub Enterprise (https://HOST/api/v3), for ci and ticket watches; empty turns GitHub off",
		forge.Gitea:  "base URL of a Gitea or Forgejo (/api/v1 is added if missing) for ci and ticket watches; empty leaves Gitea off",
		forge.GitLab: "API base URL of GitLab (/api/v4 is added if missing) for ci and ticket watches; empty turns GitLab off",
	}
	var ks []key
	for _, p := range forge.Providers() {
		up := strings.ToUpper(string(p))
		ks = append(ks,
			key{
				name: "forges." + string(p) + ".url", flagName: string(p) + "-url", envName: "VIGIL_" + up + "_URL",
				usage: what[p], typ: "url",
				set:  func(c *Config, s string) error { endpoint(c, p).URL = strings.TrimSpace(s); return nil },
				show: func(c Config) string { return forge.RedactURL(endpoint(&c, p).URL) },
			},
			key{
				name: "forges." + string(p) + ".token", flagName: string(p) + "-token", envName: "VIGIL_" + up + "_TOKEN",
				usage: "token for " + string(p) + " reads (prefer the environment or the config file: a flag shows in the process list)", typ: "secret",
				set: func(c *Config, s string) error { endpoint(c, p).Token = strings.TrimSpace(s); return nil },
				show: func(c Config) string {
					if endpoint(&c, p).Token != "" {
						return "[redacted]"
					}
					return ""
				},
			},
			key{
				name: "forges." + string(p) + ".login", flagName: string(p) + "-login", envName: "VIGIL_" + up + "_LOGIN",
				usage: "the login the " + string(p) + " token comments as (a GitHub App's is SLUG[bot]); empty reads it from the forge", typ: "string",
				set:  func(c *Config, s string) error { endpoint(c, p).Login = strings.TrimSpace(s); return nil },
				show: func(c Config) string { return endpoint(&c, p).Login },
			},
		)
	}
	return ks
}

// expandPath expands a leading "~/" and makes the path absolute.
func expandPath(p string) string {
	if p == "" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok || p == "~" {
		if h, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(h, rest)
		}
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}

// Key describes one configuration key for documentation.
type Key struct {
	Name    string // in a config file
	Flag    string // without the dashes
	Env     string
	Default string
	Usage   string
}

// Keys lists the configuration keys with their defaults for the current
// user, in the order of the table.
func Keys() []Key {
	def := DefaultConfig()
	out := make([]Key, 0, 16)
	for _, k := range configKeys() {
		out = append(out, Key{Name: k.name, Flag: k.flag(), Env: k.env(), Default: k.show(def), Usage: k.usage})
	}
	return out
}

// BindFlags defines one flag per configuration key on fs, plus --config.
// The defaults shown are those of DefaultConfig; only flags that were set
// override the environment and the config file in Load.
func BindFlags(fs *pflag.FlagSet) {
	def := DefaultConfig()
	fs.String("config", "", "JSON config file (also "+EnvConfig+")")
	for _, k := range configKeys() {
		usage := k.usage + " (" + k.env() + ")"
		if k.bool {
			b, _ := strconv.ParseBool(k.show(def))
			fs.Bool(k.flag(), b, usage)
			continue
		}
		fs.Var(&textValue{s: k.show(def), typ: k.typ}, k.flag(), usage)
	}
}

// textValue is a flag holding text that Load parses, shown with its type.
type textValue struct{ s, typ string }

func (v *textValue) String() string     { return v.s }
func (v *textValue) Set(s string) error { v.s = s; return nil }
func (v *textValue) Type() string       { return v.typ }

// Load builds the configuration from, in increasing precedence: the
// defaults, the JSON config file (--config, else $VIGIL_CONFIG), the
// VIGIL_… environment variables, and the flags set on fs (defined by
// BindFlags; fs may be nil). getenv reads the environment (nil means
// os.Getenv). The result is not validated: call Validate.
func Load(fs *pflag.FlagSet, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := defaultConfig(getenv)

	file := getenv(EnvConfig)
	if fs != nil {
		if f := fs.Lookup("config"); f != nil && f.Changed {
			file = f.Value.String()
		}
	}
	if file != "" {
		if err := c.loadFile(file); err != nil {
			return Config{}, err
		}
	}
	for _, k := range configKeys() {
		v := getenv(k.env())
		if v == "" {
			continue
		}
		if err := k.set(&c, v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", k.env(), err)
		}
	}
	if fs != nil {
		for _, k := range configKeys() {
			f := fs.Lookup(k.flag())
			if f == nil || !f.Changed {
				continue
			}
			if err := k.set(&c, f.Value.String()); err != nil {
				return Config{}, fmt.Errorf("--%s: %w", k.flag(), err)
			}
		}
	}
	return c, nil
}

// loadFile applies a JSON config file: an object whose keys are the
// configuration keys. Unknown keys are refused, so a typo is not ignored.
func (c *Config) loadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var nested map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&nested); err != nil {
		return fmt.Errorf("config file %s: not a JSON object: %w", path, err)
	}
	// What follows the object (a second one, a stray brace) would be
	// ignored, with the settings it holds.
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: there is more after the JSON object (byte %d on): the file must hold one object", path, d.InputOffset())
	}
	// encoding/json keeps the last of two members with one name and drops
	// the first without a word: a key given twice is refused instead.
	if err := duplicateKey(b); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	// Dotted keys may be spelled nested: {"forges": {"github": {"url": …}}}
	// is "forges.github.url".
	m := make(map[string]json.RawMessage, len(nested))
	if err := flattenKeys("", nested, m, 0); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	byName := make(map[string]key)
	for _, k := range configKeys() {
		byName[k.name] = k
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k, ok := byName[n]
		if !ok {
			return fmt.Errorf("config file %s: unknown key %q", path, n)
		}
		raw := bytes.TrimSpace(m[n])
		var err error
		switch {
		case len(raw) > 0 && raw[0] == '[' && k.list != nil:
			var v []string
			if err = json.Unmarshal(raw, &v); err == nil {
				err = k.list(c, v)
			}
		case len(raw) > 0 && raw[0] == '"':
			var s string
			if err = json.Unmarshal(raw, &s); err == nil {
				err = k.set(c, s)
			}
		case string(raw) == "true" || string(raw) == "false" || len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
			err = k.set(c, string(raw))
		default:
			err = fmt.Errorf("unexpected value %s", raw)
		}
		if err != nil {
			return fmt.Errorf("config file %s: %s: %w", path, n, err)
		}
	}
	return nil
}

// duplicateKey reports a member name given twice in one object of the
// JSON document b (already decoded once, so valid), naming it dotted from
// the top: "smtp.host".
func duplicateKey(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var walk func(prefix string) error
	walk = func(prefix string) error {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'):
			seen := make(map[string]bool)
			for d.More() {
				t, err := d.Token()
				if err != nil {
					return err
				}
				name, _ := t.(string)
				if seen[name] {
					return fmt.Errorf("key %q is given twice", prefix+name)
				}
				seen[name] = true
				if err := walk(prefix + name + "."); err != nil {
					return err
				}
			}
			_, err = d.Token()
		case json.Delim('['):
			for d.More() {
				if err := walk(prefix); err != nil {
					return err
				}
			}
			_, err = d.Token()
		}
		return err
	}
	return walk("")
}

// flattenKeys copies the members of an object into out, spelling those of
// nested objects with dotted keys.
func flattenKeys(prefix string, in, out map[string]json.RawMessage, depth int) error {
	for k, v := range in {
		name := prefix + k
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '{' {
			if depth >= 3 {
				return fmt.Errorf("unknown key %q", name)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t, &obj); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := flattenKeys(name+".", obj, out, depth+1); err != nil {
				return err
			}
			continue
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("key %q is given twice", name)
		}
		out[name] = v
	}
	return nil
}

// leases returns the lease and its renewal interval, defaults applied.
func (c Config) leases() (time.Duration, time.Duration) {
	l, r := c.Lease, c.LeaseRenew
	if l <= 0 {
		l = lease.DefaultLease
	}
	if r <= 0 {
		r = min(lease.DefaultRenew, l/3)
	}
	return l, r
}
