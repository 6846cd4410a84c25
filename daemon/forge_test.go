package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/internal/daemontest"
)

const (
	forgeSHA    = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"
	forgeSecret = "ghp_s3cr3tT0k3nThatMustNotLeak"
)

func TestForgeSettingsLoad(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{
		"forges": {
			"gitea": {"url": "https://gitea.example.com", "token": "from-file"},
			"gitlab": {"token": "gl-file"}
		},
		"forges.github.url": "https://ghe.example.com/api/v3"
	}`)
	env := map[string]string{
		"HOME":               "/h",
		"VIGIL_CONFIG":       file,
		"VIGIL_GITHUB_TOKEN": "gh-env",
		"VIGIL_GITHUB_LOGIN": "vigil-agent[bot]",
		"VIGIL_GITEA_TOKEN":  " gitea-env\n",
	}
	c, err := daemon.Load(parseFlags(t, "--gitlab-url", "https://gitlab.example.com"), fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	want := forge.Settings{
		GitHub: forge.Endpoint{URL: "https://ghe.example.com/api/v3", Token: "gh-env", Login: "vigil-agent[bot]"}, // file, then env
		Gitea:  forge.Endpoint{URL: "https://gitea.example.com", Token: "gitea-env"},                              // env over file, trimmed
		GitLab: forge.Endpoint{URL: "https://gitlab.example.com", Token: "gl-file"},                               // flag; file
	}
	if diff := cmp.Diff(want, c.Forges); diff != "" {
		t.Errorf("Load forges (-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}

	for _, tc := range []struct{ file, want string }{
		{`{"forges": {"github": {"tokn": "x"}}}`, `unknown key "forges.github.tokn"`},
		{`{"forges": {"bitbucket": {"url": "x"}}}`, `unknown key "forges.bitbucket.url"`},
	} {
		_, err := daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/h", "VIGIL_CONFIG": writeFile(t, tc.file)}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want %s", tc.file, err, tc.want)
		}
	}

	// An empty URL in the file turns a provider with a default off.
	c, err = daemon.Load(nil, fakeEnv(map[string]string{"HOME": "/h", "VIGIL_CONFIG": writeFile(t, `{"forges.github.url": ""}`)}))
	if err != nil || c.Forges.GitHub.URL != "" || c.Forges.GitLab.URL != forge.DefaultGitLabURL {
		t.Errorf("github off: %+v, %v", c.Forges, err)
	}
}

func TestForgeValidateAndKeys(t *testing.T) {
	t.Parallel()
	c := daemon.DefaultConfig()
	c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
	c.Forges.Gitea = forge.Endpoint{URL: "https://admin:hunter2@gitea example.com", Token: forgeSecret}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "forges.gitea.url") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), forgeSecret) {
		t.Errorf("Validate(bad gitea url) = %v, want an error naming forges.gitea.url without secrets", err)
	}
	if s := fmt.Sprintf("%v %+v", c, c); strings.Contains(s, forgeSecret) {
		t.Errorf("a formatted Config shows the token: %s", s)
	}
	keys := map[string]daemon.Key{}
	for _, k := range daemon.Keys() {
		keys[k.Name] = k
	}
	for _, p := range []string{"github", "gitea", "gitlab"} {
		up := strings.ToUpper(p)
		u, tok, login := keys["forges."+p+".url"], keys["forges."+p+".token"], keys["forges."+p+".login"]
		if u.Env != "VIGIL_"+up+"_URL" || u.Flag != p+"-url" || tok.Env != "VIGIL_"+up+"_TOKEN" || tok.Flag != p+"-token" ||
			login.Env != "VIGIL_"+up+"_LOGIN" || login.Flag != p+"-login" {
			t.Errorf("keys of %s: %+v %+v %+v", p, u, tok, login)
		}
	}
	if keys["forges.github.url"].Default != forge.DefaultGitHubURL || keys["forges.gitea.url"].Default != "" {
		t.Errorf("defaults: %+v %+v", keys["forges.github.url"], keys["forges.gitea.url"])
	}
}

// syncBuffer is a log destination the daemon's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged is start with a debug logger writing to logs.
func startLogged(t *testing.T, cfg daemon.Config, logs io.Writer) *running {
	t.Helper()
	d := daemontest.Start(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return &running{Daemon: d.Daemon, stop: d.Stop}
}

// TestForgeWatches runs ci and ticket watches through a daemon configured
// with a fake GitHub, and checks the token shows nowhere: not in the log,
// not in any answer of the API, not in the mailbox.
func TestForgeWatches(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.Token, gh.Login = forgeSecret, "vigil-bot"
	gh.SetRef("acme/api", "main", forgeSHA)
	gh.SetRuns("acme/api", forgeSHA, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: time.Now(), Completed: time.Now()})
	gh.SetTicket("acme/api", 7, forgetest.Ticket{Title: "Flaky test", State: "open", Comments: []string{"ada", "vigil-bot"}})

	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Forges = forge.Settings{GitHub: gh.Endpoint(forgeSecret)}
	logs := &syncBuffer{}
	d := startLogged(t, cfg, logs)
	c := newClient(t, d)
	ctx := t.Context()
	var answers []any

	// A branch is resolved to its commit at registration; the first
	// observation, returned to the caller, already answers.
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "r", Observe: true,
		Predicate: json.RawMessage(`{"repo": "Acme/API", "sha": "main"}`)})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, w)
	var p struct{ Repo, SHA string }
	json.Unmarshal(w.Predicate, &p)
	if p.SHA != forgeSHA || p.Repo != "acme/api" {
		t.Fatalf("stored predicate %s, want the resolved commit", w.Predicate)
	}
	if w.State != vigil.StateFired || !w.AnsweredAtCreation || w.Outcome == nil || !strings.Contains(w.Outcome.Sentence, "CI on acme/api@3f2a1b0 is done: the one check passed") {
		t.Fatalf("ci watch = %s %+v, want fired at creation", w.State, w.Outcome)
	}

	// A ticket: the baseline is silent.
	tw, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTicket, Recipient: "r", Observe: true,
		Predicate: json.RawMessage(`{"repo": "acme/api", "number": 7}`)})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, tw)
	if tw.State != vigil.StatePending || tw.LastObservation == nil || tw.LastObservation.Summary != `open issue: "Flaky test", 1 comment` {
		t.Fatalf("ticket watch = %s %+v, want pending with the baseline", tw.State, tw.LastObservation)
	}

	// A provider that is not configured is refused, naming the setting.
	_, err = c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "r",
		Predicate: json.RawMessage(`{"provider": "gitea", "repo": "acme/api", "sha": "` + forgeSHA + `"}`)})
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "VIGIL_GITEA_URL") {
		t.Fatalf("ci on unconfigured gitea: %v, want watch_unobservable naming VIGIL_GITEA_URL", err)
	}
	answers = append(answers, err.Error())

	// A rejected token settles the watch errored, saying what to fix, and
	// without showing the token the forge echoed back.
	gh.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":"Bad credentials: %s"}`, r.Header.Get("Authorization"))
		return true
	})
	bad, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "r", Observe: true,
		Predicate: json.RawMessage(`{"repo": "acme/web", "sha": "` + forgeSHA + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, bad)
	if bad.State != vigil.StateErrored || !strings.Contains(bad.Outcome.Sentence, "VIGIL_GITHUB_TOKEN") {
		t.Fatalf("rejected token: %s %+v, want errored naming the token setting", bad.State, bad.Outcome)
	}
	_, err = c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "r",
		Predicate: json.RawMessage(`{"repo": "acme/api", "sha": "develop"}`)})
	if err == nil {
		t.Fatal("resolving with a rejected token: no error")
	}
	answers = append(answers, err.Error())

	page, err := c.Watches(ctx, vigil.ListRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, page, allMessages(t, c, "r"))
	out, _ := json.Marshal(answers)
	for what, s := range map[string]string{"the API's answers": string(out), "the log": logs.String()} {
		if strings.Contains(s, forgeSecret) {
			t.Errorf("%s show the token:\n%s", what, s)
		}
	}
	if !strings.Contains(logs.String(), "vigil is serving") {
		t.Errorf("the log is empty: the test did not look at it")
	}
}
