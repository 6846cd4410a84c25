package ticket_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ticket"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	token  = "glpat-s3cr3tT0k3nDoNotLeak"
	vigilo = "vigil-bot" // the token's own login
)

func setup(t *testing.T, srv *forgetest.Server) *ticket.Watcher {
	t.Helper()
	srv.Token, srv.Login = token, vigilo
	set, err := forge.New(srv.Settings(token), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.CloseIdleConnections)
	return ticket.New(ticket.Config{Forges: set})
}

func canon(t *testing.T, w *ticket.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), t0)
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

// stream probes like the scheduler does: each answer is the next probe's
// Last, except unavailable ones, which are never recorded.
type stream struct {
	t    *testing.T
	w    *ticket.Watcher
	pred json.RawMessage
	last *vigil.Observation
	now  time.Time
}

func (s *stream) probe() vigil.Observation {
	s.t.Helper()
	s.now = s.now.Add(time.Minute) // past the shared read's window
	obs, err := watcher.Run(context.Background(), s.w, watcher.Probe{WatchID: "w", Kind: vigil.KindTicket, Predicate: s.pred, Now: s.now, Last: s.last})
	if err != nil {
		s.t.Fatal(err)
	}
	obs.At = time.Time{}
	if obs.Verdict != vigil.VerdictUnavailable {
		// Round-trip through JSON, as the store does.
		b, _ := json.Marshal(obs)
		var back vigil.Observation
		json.Unmarshal(b, &back)
		s.last = &back
	}
	return obs
}

func TestBaselineThenChanges(t *testing.T) {
	t.Parallel()
	for _, p := range forge.Providers() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, p)
			state, pull := "open", true
			if p == forge.GitLab {
				state = "opened"
			}
			srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", Body: "steps", State: state, Pull: pull, MergeRequest: p == forge.GitLab, Draft: true, Comments: []string{"ada"}})
			w := setup(t, srv)
			typ := ""
			if p == forge.GitLab {
				typ = `,"type":"merge_request"`
			}
			s := &stream{t: t, w: w, pred: canon(t, w, fmt.Sprintf(`{"provider":%q,"repo":"acme/api","number":7%s}`, p, typ)), now: t0}
			edit := func(f func(*forgetest.Ticket)) { srv.EditTicket("acme/api", 7, p == forge.GitLab, f) }

			base := s.probe()
			kind := "pull request"
			if p == forge.GitLab {
				kind = "merge request"
			}
			if base.Verdict != vigil.VerdictPending || base.Summary != fmt.Sprintf(`open %s (draft): "A", 1 comment`, kind) {
				t.Fatalf("baseline = %+v, want a silent pending", base)
			}
			for _, k := range []string{"title", "state", "draft", "body_sha256", "human_comments", "type", "url"} {
				if _, ok := base.Facts[k]; !ok {
					t.Fatalf("baseline facts %v lack %s", base.Facts, k)
				}
			}
			if obs := s.probe(); obs.Verdict != vigil.VerdictPending || !obs.Same(&base) {
				t.Fatalf("unchanged: %+v, want the same pending", obs)
			}
			edit(func(tk *forgetest.Ticket) { tk.Title = "B" })
			if obs := s.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != `title: "A" → "B"` || obs.Facts["title"] != "B" {
				t.Fatalf("title edit: %+v, want one change", obs)
			}
			if obs := s.probe(); obs.Verdict != vigil.VerdictPending {
				t.Fatalf("after the change was reported: %+v, want pending", obs)
			}
			edit(func(tk *forgetest.Ticket) { tk.Comments = append(tk.Comments, vigilo) })
			if obs := s.probe(); obs.Verdict != vigil.VerdictPending {
				t.Fatalf("a comment by vigil's own login: %+v, want no change", obs)
			}
			edit(func(tk *forgetest.Ticket) {
				tk.Comments = append(tk.Comments, "bob", "carol")
				tk.Draft = false
				tk.Body = "steps, edited"
			})
			if obs := s.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != "marked ready for review; description edited; 2 new comments" {
				t.Fatalf("several changes: %+v", obs)
			}
			edit(func(tk *forgetest.Ticket) { tk.State = "closed" })
			if obs := s.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != "state: open → closed" {
				t.Fatalf("closed: %+v", obs)
			}
		})
	}
}

// TestUnavailableKeepsBaseline: an outage answers unavailable and the
// change made meanwhile is reported once it clears, against the baseline
// from before.
func TestUnavailableKeepsBaseline(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open"})
	w := setup(t, srv)
	s := &stream{t: t, w: w, pred: canon(t, w, `{"repo":"acme/api","number":7}`), now: t0}
	s.probe()
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Title = "B" })
	if obs := s.probe(); obs.Verdict != vigil.VerdictUnavailable || obs.Permanent {
		t.Fatalf("during an outage: %+v, want unavailable", obs)
	}
	srv.Intercept(nil)
	if obs := s.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != `title: "A" → "B"` {
		t.Fatalf("after the outage: %+v, want the change", obs)
	}
}

func TestMergedAndMissing(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.Gitea)
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "Fix", State: "open", Pull: true})
	w := setup(t, srv)
	s := &stream{t: t, w: w, pred: canon(t, w, `{"provider":"gitea","repo":"acme/api","number":7}`), now: t0}
	s.probe()
	srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Merged = true })
	if obs := s.probe(); obs.Summary != "state: open → merged" {
		t.Fatalf("merged: %+v", obs)
	}
	s2 := &stream{t: t, w: w, pred: canon(t, w, `{"provider":"gitea","repo":"acme/api","number":8}`), now: t0}
	if obs := s2.probe(); !obs.Permanent || !strings.Contains(obs.Reason, "acme/api#8 not found") {
		t.Fatalf("missing ticket: %+v, want a permanent not found", obs)
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	w := ticket.New(ticket.Config{})
	for in, want := range map[string]string{
		`{"repo":"Acme/API","number":7}`:                                    `{"number":7,"provider":"github","repo":"acme/api"}`,
		`{"provider":"gitea","repo":"acme/api","number":7}`:                 `{"number":7,"provider":"gitea","repo":"acme/api"}`,
		`{"provider":"gitlab","repo":"group/sub/api","number":7}`:           `{"number":7,"provider":"gitlab","repo":"group/sub/api","type":"issue"}`,
		`{"provider":"gitlab","repo":"acme/api","number":7,"type":"MR"}`:    `{"number":7,"provider":"gitlab","repo":"acme/api","type":"merge_request"}`,
		`{"provider":"gitlab","repo":"acme/api","number":7,"type":"issue"}`: `{"number":7,"provider":"gitlab","repo":"acme/api","type":"issue"}`,
	} {
		if got := canon(t, w, in); string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	w := ticket.New(ticket.Config{})
	for _, tc := range []struct{ in, field, has string }{
		{`{"repo":"acme/api","number":-3}`, "predicate.number", "from 1"},
		{`{"repo":"acme/api","number":0}`, "predicate.number", "from 1"},
		{`{"repo":"acme/api","number":1.5}`, "predicate.number", "whole number"},
		{`{"repo":"acme/api","number":"7"}`, "predicate.number", "whole number"},
		{`{"repo":"acme/api"}`, "predicate.number", "required"},
		{`{"repo":"acme","number":7}`, "predicate.repo", "owner/name"},
		{`{"number":7}`, "predicate.repo", "required"},
		{`{"provider":"jira","repo":"acme/api","number":7}`, "predicate.provider", "github, gitea or gitlab"},
		{`{"repo":"acme/api","number":7,"type":"merge_request"}`, "predicate.type", "gitlab only"},
		{`{"provider":"gitlab","repo":"acme/api","number":7,"type":"epic"}`, "predicate.type", "issue or merge_request"},
	} {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tc.in), t0)
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tc.field || !strings.Contains(vigil.ErrorMessage(err), tc.has) {
			t.Errorf("Canonicalize(%s) = %v (field %q), want invalid_predicate on %s mentioning %q", tc.in, err, vigil.ErrorField(err), tc.field, tc.has)
		}
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	set, err := forge.New(forge.DefaultSettings(), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := ticket.New(ticket.Config{Forges: set})
	err = w.Admit(context.Background(), canon(t, w, `{"provider":"gitea","repo":"acme/api","number":7}`))
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "VIGIL_GITEA_URL") {
		t.Fatalf("Admit(gitea, unconfigured) = %v", err)
	}
	for _, p := range []string{"github", "gitlab"} {
		if err := w.Admit(context.Background(), canon(t, w, `{"provider":"`+p+`","repo":"acme/api","number":7}`)); err != nil {
			t.Errorf("Admit(%s, default) = %v", p, err)
		}
	}
}

func TestFactsSurviveTheStore(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open", Comments: []string{"ada", "bob"}})
	w := setup(t, srv)
	s := &stream{t: t, w: w, pred: canon(t, w, `{"repo":"acme/api","number":7}`), now: t0}
	base := s.probe()
	want := map[string]any{"title": "A", "state": "open", "draft": false, "human_comments": 2, "type": "issue",
		"url": "https://github.com/acme/api/issues/7", "body_sha256": base.Facts["body_sha256"],
		"reviews": 0, "review_comments": 0, "latest_review": ""}
	if diff := cmp.Diff(want, base.Facts); diff != "" {
		t.Fatalf("facts (-want +got):\n%s", diff)
	}
}
