package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/forge"
)

// fakeEnv is an environment for Load.
func fakeEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func parseFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	daemon.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return fs
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vigil.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	env := fakeEnv(map[string]string{"HOME": "/home/ada"})
	c, err := daemon.Load(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	want := daemon.Config{
		Listen:       "127.0.0.1:7474",
		DataDir:      "/home/ada/.local/share/vigil",
		Roots:        []string{"/home/ada"},
		ProbeWorkers: 8,
		Limits:       vigil.DefaultLimits(),
		Forges:       forge.DefaultSettings(),
		// The per-token registration limit: 10 a second, bursts of 100.
		RegisterRate:  10,
		RegisterBurst: 100,
		// Long-lived requests per scoped token at once.
		MaxStreamsPerToken: 64,
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Load with no settings (-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(defaults) = %v", err)
	}
	if got, want := c.DatabasePath(), "/home/ada/.local/share/vigil/vigil.db"; got != want {
		t.Errorf("DatabasePath() = %q, want %q", got, want)
	}

	c, err = daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/home/ada", "XDG_DATA_HOME": "/xdg"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/xdg/vigil" {
		t.Errorf("DataDir with XDG_DATA_HOME = %q, want /xdg/vigil", c.DataDir)
	}
}

// TestLoadPrecedence checks flag > env > file > default, key by key.
func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{
		"listen": "127.0.0.1:1001",
		"data_dir": "/from/file",
		"probe_workers": 2,
		"min_every": "5s",
		"allow_exec": true,
		"roots": ["/r1", "/r2"],
		"max_active": 500
	}`)
	env := map[string]string{
		"HOME":                "/home/ada",
		"VIGIL_CONFIG":        file,
		"VIGIL_LISTEN":        "127.0.0.1:2002",
		"VIGIL_PROBE_WORKERS": "3",
		"VIGIL_ROOTS":         "/e1:/e2",
		"VIGIL_DENY_PRIVATE":  "true",
	}
	fs := parseFlags(t, "--listen", "127.0.0.1:3003", "--allow-exec=false", "--max-deadline", "2d")
	c, err := daemon.Load(fs, fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Listen, DataDir     string
		Workers             int
		Roots               []string
		Exec, Deny          bool
		MinEvery, MaxDeadln time.Duration
		MaxActive           int
	}
	got := view{c.Listen, c.DataDir, c.ProbeWorkers, c.Roots, c.AllowExec, c.DenyPrivate, c.Limits.MinEvery, c.Limits.MaxDeadline, c.Limits.MaxActive}
	want := view{
		Listen:    "127.0.0.1:3003",       // flag over env and file
		DataDir:   "/from/file",           // file over default
		Workers:   3,                      // env over file
		Roots:     []string{"/e1", "/e2"}, // env over file
		Exec:      false,                  // flag over file
		Deny:      true,                   // env over default
		MinEvery:  5 * time.Second,        // file
		MaxDeadln: 48 * time.Hour,         // flag
		MaxActive: 500,                    // file
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}

	// --config beats VIGIL_CONFIG.
	other := writeFile(t, `{"listen": "127.0.0.1:4004"}`)
	c, err = daemon.Load(parseFlags(t, "--config", other), fakeEnv(map[string]string{"HOME": "/h", "VIGIL_CONFIG": file}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:4004" || c.DataDir != "/h/.local/share/vigil" {
		t.Errorf("--config over VIGIL_CONFIG: listen %q data_dir %q, want the --config file's alone", c.Listen, c.DataDir)
	}
}

// TestLoadAllowedHosts reads allowed_hosts from a file (an array or a
// comma-separated string), the environment and the flag, lower-cased.
func TestLoadAllowedHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags []string
		want  []string
	}{
		{"default", nil, nil, nil},
		{"file array", map[string]string{"VIGIL_CONFIG": writeFile(t, `{"allowed_hosts": ["vigil.example.com", "Proxy.Example"]}`)}, nil,
			[]string{"vigil.example.com", "proxy.example"}},
		{"file string", map[string]string{"VIGIL_CONFIG": writeFile(t, `{"allowed_hosts": "a.example, b.example"}`)}, nil,
			[]string{"a.example", "b.example"}},
		{"env over file", map[string]string{"VIGIL_CONFIG": writeFile(t, `{"allowed_hosts": ["a.example"]}`), "VIGIL_ALLOWED_HOSTS": "c.example,,10.0.0.5"}, nil,
			[]string{"c.example", "10.0.0.5"}},
		{"flag over env", map[string]string{"VIGIL_ALLOWED_HOSTS": "c.example"}, []string{"--allowed-hosts", "d.example,[2001:db8::1]"},
			[]string{"d.example", "2001:db8::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": "/h"}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := daemon.Load(parseFlags(t, tc.flags...), fakeEnv(env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.AllowedHosts); diff != "" {
				t.Errorf("AllowedHosts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags []string
		want  string
	}{
		{"unknown file key", map[string]string{"VIGIL_CONFIG": writeFile(t, `{"listne": "x"}`)}, nil, `unknown key "listne"`},
		{"file not JSON", map[string]string{"VIGIL_CONFIG": writeFile(t, `listen = 1`)}, nil, "not a JSON object"},
		{"file with a second object", map[string]string{"VIGIL_CONFIG": writeFile(t, "{\"listen\": \"127.0.0.1:1\"}\n{\"allow_exec\": \"perhaps\"}\n")}, nil, "after the JSON object"},
		{"file with a stray brace", map[string]string{"VIGIL_CONFIG": writeFile(t, `{"listen": "127.0.0.1:1"}}`)}, nil, "after the JSON object"},
		{"missing file", map[string]string{"VIGIL_CONFIG": "/nonexistent/vigil.json"}, nil, "config file"},
		{"bad env int", map[string]string{"VIGIL_PROBE_WORKERS": "many"}, nil, "VIGIL_PROBE_WORKERS"},
		{"bad env bool", map[string]string{"VIGIL_ALLOW_EXEC": "perhaps"}, nil, "VIGIL_ALLOW_EXEC"},
		{"bad flag duration", nil, []string{"--min-every", "soon"}, "--min-every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": "/h"}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := daemon.Load(parseFlags(t, tc.flags...), fakeEnv(env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	base := func() daemon.Config {
		c := daemon.DefaultConfig()
		c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(*daemon.Config)
		want   string // "" means valid
	}{
		{"defaults", func(*daemon.Config) {}, ""},
		{"sqlite path", func(c *daemon.Config) { c.Store = "sqlite:/data/v.db" }, ""},
		{"postgres", func(c *daemon.Config) { c.Store = "postgres://u:secret@db/vigil" }, ""},
		{"postgresql", func(c *daemon.Config) { c.Store = "postgresql://db/vigil?sslmode=disable" }, ""},
		{"postgres that does not parse", func(c *daemon.Config) { c.Store = "postgres://u:secret@db/vigil?sslmode=bogus" }, "not a PostgreSQL URL"},
		{"other store", func(c *daemon.Config) { c.Store = "mysql://u:secret@db/x" }, "postgres:// URL"},
		{"relative sqlite", func(c *daemon.Config) { c.Store = "sqlite:v.db" }, "absolute"},
		{"listen without port", func(c *daemon.Config) { c.Listen = "localhost" }, "host:port"},
		{"listen bad port", func(c *daemon.Config) { c.Listen = "localhost:http" }, "port"},
		{"relative data dir", func(c *daemon.Config) { c.DataDir = "data" }, "absolute"},
		{"no data dir", func(c *daemon.Config) { c.DataDir = "" }, "data_dir"},
		{"no roots", func(c *daemon.Config) { c.Roots = nil }, "roots"},
		{"relative root", func(c *daemon.Config) { c.Roots = []string{"src"} }, "roots"},
		{"no workers", func(c *daemon.Config) { c.ProbeWorkers = 0 }, "probe_workers"},
		{"zero min_every", func(c *daemon.Config) { c.Limits.MinEvery = 0 }, "min_every"},
		{"max_deadline below min_every", func(c *daemon.Config) { c.Limits.MaxDeadline = time.Millisecond }, "max_deadline"},
		{"no max_active", func(c *daemon.Config) { c.Limits.MaxActive = 0 }, "max_active"},
		{"per recipient over total", func(c *daemon.Config) { c.Limits.MaxActivePerRecipient = c.Limits.MaxActive + 1 }, "max_active_per_recipient"},
		{"allowed hosts", func(c *daemon.Config) {
			c.AllowedHosts = []string{"vigil.example.com", "10.0.0.5", "2001:db8::1", "box"}
		}, ""},
		{"allowed host with a port", func(c *daemon.Config) { c.AllowedHosts = []string{"vigil.example.com:7474"} }, "allowed_hosts"},
		{"allowed host as a URL", func(c *daemon.Config) { c.AllowedHosts = []string{"https://vigil.example.com"} }, "allowed_hosts"},
		{"allowed host with a wildcard", func(c *daemon.Config) { c.AllowedHosts = []string{"*.example.com"} }, "allowed_hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Errorf("Validate() = %v: shows a password", err)
			}
		})
	}
}

func TestKeysDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range daemon.Keys() {
		for _, s := range []string{"`" + k.Name + "`", "`--" + k.Flag + "`", "`" + k.Env + "`"} {
			if !strings.Contains(string(b), s) {
				t.Errorf("docs/operations.md does not mention %s", s)
			}
		}
	}
}

// TestLoadFileDuplicateKeys refuses a config file naming one key twice, in
// one object or nested, naming the key: JSON decoding keeps the last and
// drops the first silently, so an edit appended below an old value would
// win or lose depending on where it was written.
func TestLoadFileDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, want string }{
		{"top level", `{"listen": "127.0.0.1:1", "probe_workers": 2, "listen": "127.0.0.1:2"}`, `"listen"`},
		{"nested", `{"smtp": {"host": "a.example", "host": "b.example"}}`, `"smtp.host"`},
		{"nested twice", `{"forges": {"github": {"url": "https://a.example"}}, "forges": {"gitea": {"url": "https://b.example"}}}`, `"forges"`},
		{"flat and nested", `{"forges.github.url": "https://a.example", "forges": {"github": {"url": "https://b.example"}}}`, `"forges.github.url"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/h", "VIGIL_CONFIG": writeFile(t, tc.body)}))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "twice") {
				t.Errorf("Load(%s) error = %v, want one naming %s given twice", tc.body, err, tc.want)
			}
		})
	}
	// Keys differing only in case are two keys, and the one not lower
	// case is unknown.
	_, err := daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/h", "VIGIL_CONFIG": writeFile(t, `{"lease_renew": "1s", "Lease_Renew": "2s"}`)}))
	if err == nil || !strings.Contains(err.Error(), `unknown key "Lease_Renew"`) {
		t.Errorf("Load with Lease_Renew: error = %v, want unknown key \"Lease_Renew\"", err)
	}
}

// TestStoreNameHidesPasswords: a PostgreSQL URL may carry its password in
// the query (pgx reads password= and sslpassword= there as libpq does);
// the start-up line, the panel and a refusal show the URL without it.
func TestStoreNameHidesPasswords(t *testing.T) {
	t.Parallel()
	for _, store := range []string{
		"postgres://vigil:hunter2@db/vigil",
		"postgres://vigil@db/vigil?sslmode=disable&password=hunter2",
		"postgresql://db/vigil?password=hunter2",
		"postgres://db/vigil?PassWord=hunter2&sslmode=disable",
		"postgres://db/vigil?sslmode=verify-full&sslpassword=hunter2&sslkey=/k.pem",
		"postgres://db/vigil?password=hunter%32",
	} {
		c := daemon.DefaultConfig()
		c.Store = store
		if got := c.StoreName(); strings.Contains(got, "hunter") || !strings.HasPrefix(got, "postgres") {
			t.Errorf("StoreName() of %s = %q: shows the password", store, got)
		}
		c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
		c.Store = store + "?sslmode=bogus"
		if strings.Contains(store, "?") {
			c.Store = store + "&sslmode=bogus"
		}
		if err := c.Validate(); err == nil || strings.Contains(err.Error(), "hunter") {
			t.Errorf("Validate() with store %s = %v, want a refusal without the password", c.Store, err)
		}
	}
	c := daemon.DefaultConfig()
	c.Store = "postgres://db/vigil?sslmode=disable&password=hunter2&application_name=vigil"
	if got, want := c.StoreName(), "postgres://db/vigil?sslmode=disable&password=…&application_name=vigil"; got != want {
		t.Errorf("StoreName() = %q, want %q", got, want)
	}
}

// TestKeysTableMatchesDocs reads the settings tables of
// docs/operations.md (those headed "| key | flag | environment | default
// |") and compares them with Keys() both ways: every row names a key the
// code reads, with its flag and environment variable, and a default that
// is the code's; every key of the code has a row. vigil serve --help shows
// the same defaults, as BindFlags defines them.
func TestKeysTableMatchesDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ flag, env, def string }
	rows := map[string]row{}
	inTable := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| key | flag | environment | default |") {
			inTable = true
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Errorf("docs/operations.md: settings row %q has %d cells, want 5", line, len(cells))
			continue
		}
		unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		name := unquote(cells[0])
		if _, dup := rows[name]; dup {
			t.Errorf("docs/operations.md: key %s has two rows", name)
		}
		rows[name] = row{flag: unquote(cells[1]), env: unquote(cells[2]), def: strings.TrimSpace(cells[3])}
	}
	// Defaults worked out at start, that the table describes in words.
	computed := map[string]bool{"data_dir": true, "roots": true, "replica": true, "smtp.from": true, "public_url": true}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	daemon.BindFlags(fs)
	seen := map[string]bool{}
	for _, k := range daemon.Keys() {
		seen[k.Name] = true
		r, ok := rows[k.Name]
		if !ok {
			t.Errorf("docs/operations.md: no row for the key %s (--%s, %s)", k.Name, k.Flag, k.Env)
			continue
		}
		if r.flag != "--"+k.Flag || r.env != k.Env {
			t.Errorf("docs/operations.md: %s has flag %s and environment %s, the code --%s and %s", k.Name, r.flag, r.env, k.Flag, k.Env)
		}
		if f := fs.Lookup(k.Flag); f == nil || f.DefValue != k.Default {
			t.Errorf("--%s: not defined with the default %q", k.Flag, k.Default)
		}
		switch {
		case computed[k.Name]:
			if r.def == "" {
				t.Errorf("docs/operations.md: %s has no default", k.Name)
			}
		case k.Default == "":
			if !strings.HasPrefix(r.def, "none") && !strings.HasPrefix(r.def, "empty") {
				t.Errorf("docs/operations.md: %s defaults to %s, the code to nothing", k.Name, r.def)
			}
		default:
			lit, _, _ := strings.Cut(strings.TrimPrefix(r.def, "`"), "`")
			if !strings.HasPrefix(r.def, "`") {
				lit = r.def
			}
			if lit == k.Default {
				continue
			}
			d1, err1 := vigil.ParseDuration(lit)
			d2, err2 := vigil.ParseDuration(k.Default)
			if err1 != nil || err2 != nil || d1 != d2 {
				t.Errorf("docs/operations.md: %s defaults to %s, the code to %q", k.Name, r.def, k.Default)
			}
		}
	}
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/operations.md: the table lists %s, which is no configuration key", name)
		}
	}
}

// TestValidateLeases names the setting at fault, lease or lease_renew, and
// refuses a renewal interval so short that the lease statements would run
// back to back against the database.
func TestValidateLeases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lease, renew time.Duration
		want         string // "" means valid
	}{
		{0, 0, ""},
		{100 * time.Millisecond, 0, ""},
		{time.Second, 10 * time.Millisecond, ""},
		{time.Hour, 0, ""},
		{-time.Second, 0, "lease -1s"},
		{50 * time.Millisecond, 0, "lease 50ms"},
		{2 * time.Hour, 0, "lease 2h"},
		{0, -time.Second, "lease_renew -1s"},
		{0, time.Nanosecond, "lease_renew 1ns"},
		{time.Second, 9 * time.Millisecond, "lease_renew 9ms"},
		{time.Second, time.Second, "lease_renew 1s"},
		{0, 20 * time.Second, "lease_renew 20s"},
	} {
		c := daemon.DefaultConfig()
		c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
		c.Lease, c.LeaseRenew = tc.lease, tc.renew
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate(lease %v, lease_renew %v) = %v, want nil", tc.lease, tc.renew, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want+":")):
			t.Errorf("Validate(lease %v, lease_renew %v) = %v, want an error starting %q", tc.lease, tc.renew, err, tc.want+":")
		}
	}
}

// TestLoadRelativePaths: a relative data_dir or root, from the config
// file, the environment or a flag, is taken from the directory vigil serve
// runs in (as docs/operations.md says), not from the config file's; a
// relative SQLite file in store is refused.
func TestLoadRelativePaths(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	file := writeFile(t, `{"data_dir": "state", "roots": ["src", "/abs"]}`)
	c, err := daemon.Load(parseFlags(t, "--config", file), fakeEnv(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cwd, "state"); c.DataDir != want {
		t.Errorf("data_dir \"state\" = %q, want %q", c.DataDir, want)
	}
	if diff := cmp.Diff([]string{filepath.Join(cwd, "src"), "/abs"}, c.Roots); diff != "" {
		t.Errorf("roots (-want +got):\n%s", diff)
	}
	c, err = daemon.Load(parseFlags(t, "--store", "sqlite:v.db"), fakeEnv(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("store sqlite:v.db: Validate() = %v, want a refusal asking for an absolute path", err)
	}
}

// TestValidateShutdownDrain takes shutdown_drain from 0 to 1m and refuses
// the rest, naming it.
func TestValidateShutdownDrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		drain time.Duration
		ok    bool
	}{{0, true}, {5 * time.Second, true}, {time.Minute, true}, {-time.Second, false}, {time.Minute + time.Second, false}} {
		c := daemon.DefaultConfig()
		c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
		c.ShutdownDrain = tc.drain
		err := c.Validate()
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "shutdown_drain") {
			t.Errorf("Validate(shutdown_drain %v) = %v, want ok %v", tc.drain, err, tc.ok)
		}
	}
}
