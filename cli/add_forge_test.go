package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestAddForgeRequests checks the registrations add ci and add ticket
// send: the short forms and the flags, and nothing the daemon defaults.
func TestAddForgeRequests(t *testing.T) {
	t.Parallel()
	var got vigil.RegisterRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = vigil.RegisterRequest{}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("request body %s: %v", b, err)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(vigil.Watch{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Kind: got.Kind, Predicate: got.Predicate, Recipient: got.Recipient, State: vigil.StatePending})
	}))
	defer srv.Close()
	env := map[string]string{"VIGIL_ADDR": srv.URL, "VIGIL_TOKEN": "t", "USER": "tester", "VIGIL_RECIPIENT": "agent-7"}
	for _, tc := range []struct {
		args []string
		kind vigil.Kind
		pred string
	}{
		{[]string{"add", "ci", "acme/api@main"}, vigil.KindCI, `{"repo":"acme/api","sha":"main"}`},
		{[]string{"add", "ci", "acme/api@release/v2"}, vigil.KindCI, `{"repo":"acme/api","sha":"release/v2"}`},
		{[]string{"add", "ci", "--repo", "acme/api", "--sha", "3f2a1b0", "--check", "build", "--check", "unit tests", "--stall", "1h", "--provider", "gitea"},
			vigil.KindCI, `{"checks":["build","unit tests"],"provider":"gitea","repo":"acme/api","sha":"3f2a1b0","stall":"1h"}`},
		{[]string{"add", "ci", "--provider", "gitlab", "group/sub/project@v1.2.0"}, vigil.KindCI, `{"provider":"gitlab","repo":"group/sub/project","sha":"v1.2.0"}`},
		{[]string{"add", "ticket", "acme/api#41"}, vigil.KindTicket, `{"number":41,"repo":"acme/api"}`},
		{[]string{"add", "ticket", "group/project!12"}, vigil.KindTicket, `{"number":12,"provider":"gitlab","repo":"group/project","type":"merge_request"}`},
		{[]string{"add", "ticket", "--repo", "acme/api", "--number", "7", "--provider", "gitea"}, vigil.KindTicket, `{"number":7,"provider":"gitea","repo":"acme/api"}`},
		{[]string{"add", "ticket", "acme/api#-3"}, vigil.KindTicket, `{"number":-3,"repo":"acme/api"}`}, // the daemon refuses it
		{[]string{"add", "ticket", "acme/api#41", "--bots"}, vigil.KindTicket, `{"bots":true,"number":41,"repo":"acme/api"}`},
	} {
		r := runCLI(t, env, tc.args...)
		if r.code != 0 {
			t.Errorf("vigil %v: exit %d: %s", tc.args, r.code, r.stderr)
			continue
		}
		want := vigil.RegisterRequest{Kind: tc.kind, Recipient: "agent-7", Predicate: json.RawMessage(tc.pred)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("vigil %v sent (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, args := range [][]string{
		{"add", "ci"},
		{"add", "ci", "acme/api"},
		{"add", "ci", "acme/api@"},
		{"add", "ci", "acme/api@main", "--repo", "acme/web"},
		{"add", "ticket"},
		{"add", "ticket", "acme/api"},
		{"add", "ticket", "acme/api#x"},
		{"add", "ticket", "acme/api#7", "--number", "8"},
	} {
		r := runCLI(t, env, args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "vigil: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("vigil %v: exit %d, stderr %q; want a one-line usage error", args, r.code, r.stderr)
		}
	}
}

// startForgeDaemon is startDaemon with the forges configured as st.
func startForgeDaemon(t *testing.T, st forge.Settings) *testDaemon {
	t.Helper()
	cfg := daemontest.Config(t)
	cfg.Forges = st
	d := daemontest.Start(t, cfg, nil)
	return &testDaemon{Daemon: d.Daemon, dataDir: cfg.DataDir}
}

// TestAddForgeEndToEnd registers ci and ticket watches through the CLI
// against a daemon reading a fake GitHub.
func TestAddForgeEndToEnd(t *testing.T) {
	t.Parallel()
	const sha = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRef("acme/api", "main", sha)
	now := time.Now()
	gh.SetRuns("acme/api", sha,
		forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: now, Completed: now},
		forgetest.Run{ID: 2, Name: "lint", Status: "completed", Conclusion: "failure", Started: now, Completed: now})
	gh.SetTicket("acme/api", 41, forgetest.Ticket{Title: "Flaky test", State: "open", Comments: []string{"ada"}})
	d := startForgeDaemon(t, forge.Settings{GitHub: gh.Endpoint("")})

	r := d.vigil(t, "add", "ci", "acme/api@main", "--for", "ci-user", "--wait")
	if r.code != ExitFailed || !strings.Contains(r.stdout, "CI on acme/api@3f2a1b0 failed: 1 of 2 checks failed: lint (https://github.com/acme/api/runs/2)") {
		t.Errorf("add ci --wait on a red commit: exit %d, stdout %q, stderr %q; want exit 1 naming lint", r.code, r.stdout, r.stderr)
	}
	r = d.vigil(t, "add", "ticket", "acme/api#41", "--for", "ci-user", "--observe")
	if r.code != 0 || !strings.Contains(r.stdout, "Watching acme/api#41") || !strings.Contains(r.stdout, `open issue: "Flaky test", 1 comment`) {
		t.Errorf("add ticket --observe: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		has  string
	}{
		{[]string{"add", "ci", "acme/api@nope"}, "predicate.sha"},
		{[]string{"add", "ci", "acme@main"}, "predicate.repo must be owner/name"},
		{[]string{"add", "ci", "--provider", "gitea", "acme/api@" + sha}, "forges.gitea.url (VIGIL_GITEA_URL)"},
		{[]string{"add", "ticket", "acme/api#-3"}, "predicate.number must be"},
		{[]string{"add", "ticket", "--provider", "bitbucket", "acme/api#3"}, "predicate.provider must be github, gitea or gitlab"},
	} {
		r := d.vigil(t, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.has) {
			t.Errorf("vigil %v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, r.code, r.stderr, tc.has)
		}
	}
	r = d.vigil(t, "ls", "--for", "ci-user", "--json")
	if strings.Count(r.stdout, `"kind": "`) != 2 {
		t.Errorf("after the refusals the daemon holds:\n%s\nwant the two watches only", r.stdout)
	}
}
