package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ci"
	"github.com/vigil-run/vigil/watcher/ticket"
)

const forgeSHA = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"

// forgeWatchers returns real ci and ticket watchers reading srv (and no
// other provider), sharing one forge.Set as the daemon's do.
func forgeWatchers(t *testing.T, srv *forgetest.Server, token string) []watcher.Watcher {
	t.Helper()
	set, err := forge.New(srv.Settings(token), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.CloseIdleConnections)
	return []watcher.Watcher{ci.New(ci.Config{Forges: set}), ticket.New(ticket.Config{Forges: set})}
}

func changed(msgs []*vigil.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Type == vigil.MessageChanged {
			out = append(out, m.Text)
		}
	}
	return out
}

// TestTicketThroughTheEngine: the baseline is silent, an edit is one
// "changed" message, a comment by vigil's own login is none.
func TestTicketThroughTheEngine(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.Token, gh.Login = "tok", "vigil-bot"
	gh.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open", Comments: []string{"ada"}})
	v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "tok")})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":7}`)})
	if !w.Standing || !w.Deadline.IsZero() || w.Every != time.Minute {
		t.Fatalf("ticket watch: standing %v, deadline %v, every %v", w.Standing, w.Deadline, w.Every)
	}
	v.tick(t0)
	if got := v.get(w.ID).LastObservation; got == nil || got.Facts["title"] != "A" {
		t.Fatalf("baseline not recorded: %+v", got)
	}
	step := t0
	next := func() { step = step.Add(time.Minute); v.tick(step) }
	next()
	gh.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Comments = append(tk.Comments, "vigil-bot") })
	next()
	if msgs := v.messages("agent-1"); len(msgs) != 0 {
		t.Fatalf("baseline or own comment mailed: %+v", msgs)
	}
	gh.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Title = "B" })
	next()
	next()
	want := []string{`acme/api#7 changed: title: "A" → "B".`}
	if got := changed(v.messages("agent-1")); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("changed messages = %q, want %q", got, want)
	}
}

// crashOnChange kills the store at the first observation that carries a
// "changed" message: after committing it (the process died before anyone
// was told) or before (it died mid-write).
type crashOnChange struct {
	vigil.Store
	afterCommit bool
	crashed     atomic.Bool
}

func (s *crashOnChange) WatchObserve(ctx context.Context, p vigil.WatchObserveParams) (bool, error) {
	if s.crashed.Load() {
		return false, errCrash
	}
	if p.Message == nil {
		return s.Store.WatchObserve(ctx, p)
	}
	s.crashed.Store(true)
	if s.afterCommit {
		if _, err := s.Store.WatchObserve(ctx, p); err != nil {
			return false, err
		}
	}
	_ = s.Store.Close()
	return false, errCrash
}

// TestTicketChangeSurvivesACrash proves, on the SQLite store, that a
// restart neither loses nor repeats a change: the new baseline and its
// "changed" message are one transaction.
func TestTicketChangeSurvivesACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		afterCommit bool
	}{{"crash after the commit", true}, {"crash before the commit", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			gh := forgetest.New(t, forge.GitHub)
			gh.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open"})
			path := filepath.Join(t.TempDir(), "vigil.db")
			st, err := sqlite.Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs := &crashOnChange{Store: st, afterCommit: tc.afterCommit}
			v := newEnv(t, envOpts{store: cs, watchers: forgeWatchers(t, gh, "")})
			w := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":7}`)})
			v.tick(t0) // the baseline
			gh.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Title = "B" })
			v.tick(t0.Add(time.Minute))
			if !cs.crashed.Load() {
				t.Fatal("the change never reached the store")
			}

			// Restart on the same file, with new watchers (a cold cache).
			st2, err := sqlite.Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			restart := t0.Add(5 * time.Minute)
			v2 := newEnvAt(t, envOpts{store: st2, watchers: forgeWatchers(t, gh, "")}, restart)
			v2.tick(restart.Add(2 * time.Minute)) // past the re-arm jitter
			v2.tick(restart.Add(3 * time.Minute))
			want := []string{`acme/api#7 changed: title: "A" → "B".`}
			if got := changed(v2.messages("agent-1")); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("after the restart the mailbox holds %q, want exactly %q", got, want)
			}
			// The next change is reported once, against the new baseline.
			gh.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Title = "C" })
			v2.tick(restart.Add(4 * time.Minute))
			v2.tick(restart.Add(5 * time.Minute))
			want = append(want, `acme/api#7 changed: title: "B" → "C".`)
			if got := changed(v2.messages("agent-1")); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("after a second change: %q, want %q", got, want)
			}
			if got := v2.get(w.ID).State; got != vigil.StatePending {
				t.Fatalf("the standing watch is %s, want pending", got)
			}
		})
	}
}

func TestGhostCheckIsNamedInWhy(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRuns("acme/api", forgeSHA,
		forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0.Add(-time.Hour), Completed: t0.Add(-55 * time.Minute)},
		forgetest.Run{ID: 2, Name: "deploy", Status: "queued", Started: t0.Add(-40 * time.Minute)})
	v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "")})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"acme/api","sha":"` + forgeSHA + `"}`)})
	v.tick(t0)
	why, err := v.eng.Why(v.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "CI on acme/api@3f2a1b0 has not settled; last seen: 2 checks: 1 passed, 1 queued (deploy); stalled, no update for over 30m: deploy"
	if !strings.HasPrefix(why.Sentence, want) {
		t.Fatalf("Why = %q, want it to start %q", why.Sentence, want)
	}
}

// TestForgeRefusalsWriteNothing: every bad input is a field-level refusal
// and nothing reaches the store.
func TestForgeRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRef("acme/api", "main", forgeSHA)
	v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "")})
	for _, tc := range []struct {
		kind        vigil.Kind
		pred        string
		code        vigil.Code
		field, want string
	}{
		{vigil.KindCI, `{"repo":"acme","sha":"main"}`, vigil.CodeInvalidPredicate, "predicate.repo", "owner/name"},
		{vigil.KindCI, `{"repo":"acme/api","sha":"no-such-branch"}`, vigil.CodeInvalidPredicate, "predicate.sha", "neither a full 40-hex SHA nor a branch"},
		{vigil.KindCI, `{"repo":"acme/api","sha":"not a ref"}`, vigil.CodeInvalidPredicate, "predicate.sha", "full 40-hex SHA"},
		{vigil.KindCI, `{"provider":"bitbucket","repo":"acme/api","sha":"main"}`, vigil.CodeInvalidPredicate, "predicate.provider", "github, gitea or gitlab"},
		{vigil.KindCI, `{"provider":"gitea","repo":"acme/api","sha":"` + forgeSHA + `"}`, vigil.CodeWatchUnobservable, "", "forges.gitea.url (VIGIL_GITEA_URL)"},
		{vigil.KindTicket, `{"repo":"acme/api","number":-3}`, vigil.CodeInvalidPredicate, "predicate.number", "from 1"},
		{vigil.KindTicket, `{"repo":"acme/api/x","number":3}`, vigil.CodeInvalidPredicate, "predicate.repo", "owner/name"},
		{vigil.KindTicket, `{"provider":"gitlab","repo":"acme/api","number":3}`, vigil.CodeWatchUnobservable, "", "forges.gitlab.url (VIGIL_GITLAB_URL)"},
	} {
		_, err := v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: tc.kind, Recipient: "agent-1", Predicate: obj(tc.pred)})
		if vigil.ErrorCode(err) != tc.code || vigil.ErrorField(err) != tc.field || !strings.Contains(vigil.ErrorMessage(err), tc.want) {
			t.Errorf("Register(%s %s) = %v (code %s, field %q), want %s on %q mentioning %q",
				tc.kind, tc.pred, err, vigil.ErrorCode(err), vigil.ErrorField(err), tc.code, tc.field, tc.want)
		}
	}
	if n := v.store.writes.Load(); n != 0 {
		t.Fatalf("refused registrations wrote %d times, want nothing", n)
	}
	if page, _ := v.eng.Watches(v.ctx, vigil.ListRequest{}); len(page.Watches) != 0 {
		t.Fatalf("refusals left %d watches", len(page.Watches))
	}
}

// TestCIBranchIdentity: a branch is resolved before identity, so the
// branch and its commit are one watch; after a push the branch names
// another commit and another watch.
func TestCIBranchIdentity(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRef("acme/api", "main", forgeSHA)
	gh.SetRuns("acme/api", forgeSHA, forgetest.Run{ID: 1, Name: "build", Status: "in_progress", Started: t0})
	v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "")})
	a := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"acme/api","sha":"main"}`)})
	b := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"ACME/api","sha":"` + forgeSHA + `"}`)})
	if !b.Existing || b.ID != a.ID {
		t.Fatalf("the branch and its commit: existing %v, ids %s %s; want one watch", b.Existing, a.ID, b.ID)
	}
	gh.SetRef("acme/api", "main", strings.Repeat("b", 40))
	c := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"acme/api","sha":"main"}`)})
	if c.Existing || c.ID == a.ID {
		t.Fatalf("after a push the branch still maps to the old watch")
	}
	v.tick(t0)
	gh.SetRuns("acme/api", forgeSHA, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0, Completed: t0})
	v.tick(t0.Add(30 * time.Second))
	if got := v.get(a.ID); got.State != vigil.StateFired || got.Outcome.Sentence != "CI on acme/api@3f2a1b0 is done: the one check passed." {
		t.Fatalf("watch on the first commit: %s %+v", got.State, got.Outcome)
	}
}

// TestCIUnknownCommitThroughTheEngine: a commit GitHub does not know yet
// keeps a ci watch pending, and "why" says so, until 10 minutes after
// its registration; then the watch errors, saying the commit never
// arrived.
func TestCIUnknownCommitThroughTheEngine(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRef("acme/api", "main", "9999999999999999999999999999999999999999")
	v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "")})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"acme/api","sha":"` + forgeSHA + `"}`)})
	v.tickEach(30*time.Second, t0.Add(9*time.Minute))
	why, err := v.eng.Why(v.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if why.Watch.State != vigil.StatePending || !strings.Contains(why.Sentence, "GitHub does not know commit 3f2a1b0 in acme/api yet") ||
		!strings.Contains(why.Sentence, "waiting for it to be pushed, until 2026-11-30 12:10:00 UTC") {
		t.Fatalf("why at +9m = %s %q, want pending, saying it waits for the push", why.Watch.State, why.Sentence)
	}
	v.tickEach(30*time.Second, t0.Add(11*time.Minute))
	got := v.get(w.ID)
	if got.State != vigil.StateErrored || got.Outcome == nil || !strings.Contains(got.Outcome.Sentence, "commit 3f2a1b0 never arrived in acme/api") ||
		!strings.Contains(got.Outcome.Sentence, "10m after the watch was registered") {
		t.Fatalf("at +11m: %s %+v, want errored, saying the commit never arrived", got.State, got.Outcome)
	}
}

// TestCIWhySaysWhatItWaitsFor: "why" of a pending ci watch names what the
// watch waits for: a suite still to run, a check that has not appeared
// (and when it will stop waiting), and the suites it does not wait for.
func TestCIWhySaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	done := t0.Add(-time.Minute)
	build := forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: done.Add(-5 * time.Minute), Completed: done}
	for _, tc := range []struct {
		name   string
		suites []forgetest.Suite
		checks string
		want   string
	}{
		{name: "a queued workflow", suites: []forgetest.Suite{{ID: 30, Status: "queued", Created: done, Updated: done}},
			want: "has not settled; last seen: 2 checks: 1 passed, 1 queued (GitHub Actions suite 30); next check at"},
		{name: "a required check not yet there", checks: `,"checks":["build","CI / e2e (push)"]`,
			want: `has not settled; last seen: 2 required checks: 1 passed, 1 not yet appeared (CI / e2e (push)); every other check has finished: failing at 2026-11-30 12:09:00 UTC unless CI / e2e (push) appears; "CI / e2e (push)" is written as GitHub's web page shows a check`},
		{name: "an app's suite not waited for", suites: []forgetest.Suite{{ID: 40, App: "codecov", Status: "queued", Created: done, Updated: done}},
			checks: `,"checks":["build","e2e"]`,
			want:   "not yet appeared (e2e); every other check has finished: failing at 2026-11-30 12:09:00 UTC unless e2e appears; not waiting for codecov"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gh := forgetest.New(t, forge.GitHub)
			gh.SetRuns("acme/api", forgeSHA, build)
			gh.SetSuites("acme/api", forgeSHA, tc.suites...)
			v := newEnv(t, envOpts{watchers: forgeWatchers(t, gh, "")})
			w := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Predicate: obj(`{"repo":"acme/api","sha":"` + forgeSHA + `"` + tc.checks + `}`)})
			v.tick(t0)
			why, err := v.eng.Why(v.ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if why.Watch.State != vigil.StatePending || !strings.Contains(why.Sentence, tc.want) {
				t.Fatalf("why = %s %q\nwant it to contain %q", why.Watch.State, why.Sentence, tc.want)
			}
		})
	}
}

// TestCIStableCountsUpstreamReads: a ci watch probed every 10 s reads
// through the forge's cache, fresh for 30 s, so three probes in a row
// can be one upstream read; stable: 3 asks for three reads, not three
// probes of one cached answer (a flappy CI seen green once).
func TestCIStableCountsUpstreamReads(t *testing.T) {
	t.Parallel()
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRuns("acme/api", forgeSHA, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0.Add(-time.Minute), Completed: t0})
	set, err := forge.New(gh.Settings(""), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.CloseIdleConnections)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{ci.New(ci.Config{Forges: set, Freshness: 30 * time.Second})}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindCI, Every: "10s", Stable: 3,
		Predicate: obj(`{"repo":"acme/api","sha":"` + forgeSHA + `"}`)})
	runs := "/repos/acme/api/commits/" + forgeSHA + "/check-runs"
	for step := t0; !step.After(t0.Add(2 * time.Minute)); step = step.Add(10 * time.Second) {
		v.tick(step)
		got := v.get(w.ID)
		reads := gh.Hits(runs)
		if got.State == vigil.StateFired {
			if reads != 3 {
				t.Fatalf("fired at +%s after %d reads of the checks, want 3", step.Sub(t0), reads)
			}
			return
		}
		if got.State != vigil.StatePending {
			t.Fatalf("at +%s: %s %+v, want pending", step.Sub(t0), got.State, got.Outcome)
		}
	}
	t.Fatalf("never fired: %d reads", gh.Hits(runs))
}
