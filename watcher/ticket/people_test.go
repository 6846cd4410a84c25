package ticket_test

import (
	"fmt"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/watcher/ticket"
)

// TestAppTokenOwnComments: with a GitHub App installation token, /user
// answers 403; the app's bot login (its slug and "[bot]", read from
// GraphQL's viewer) is vigil's own, and its comments wake no one.
func TestAppTokenOwnComments(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	w := setup(t, srv)
	srv.App = "vigil-agent"
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open", Pull: true, Comments: []string{"ada"}})
	s := &stream{t: t, w: w, pred: canon(t, w, `{"repo":"acme/api","number":7}`), now: t0}
	if base := s.probe(); base.Facts["human_comments"] != 1 {
		t.Fatalf("baseline = %+v", base)
	}
	srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) { tk.Comments = append(tk.Comments, "vigil-agent[bot]") })
	if obs := s.probe(); obs.Verdict != vigil.VerdictPending {
		t.Fatalf("a comment by the app's own bot: %+v, want no change", obs)
	}
	if n := srv.Hits("/graphql"); n != 1 {
		t.Fatalf("GraphQL's viewer read %d times, want once", n)
	}
}

// TestBotsAreNotPeople: comments by bots (GitHub's type Bot, or made
// through a GitHub App; GitLab's access-token bots; Gitea's Actions user)
// wake no one, unless the watch asks for them with "bots": true.
func TestBotsAreNotPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    forge.Provider
		bots []string
		via  map[int]string
	}{
		{p: forge.GitHub, bots: []string{"dependabot[bot]", "carol"}, via: map[int]string{2: "linear"}},
		{p: forge.GitLab, bots: []string{"project_42_bot_3f2a1b0c9d8e7f60", "group_7_bot_1a2b3c4d"}},
		{p: forge.Gitea, bots: []string{"gitea-actions", "forgejo-actions"}},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, tc.p)
			w := setup(t, srv)
			state, typ := "open", ""
			if tc.p == forge.GitLab {
				state, typ = "opened", `,"type":"merge_request"`
			}
			srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: state, Pull: true, MergeRequest: tc.p == forge.GitLab, Comments: []string{"ada"}})
			people := &stream{t: t, w: w, pred: canon(t, w, fmt.Sprintf(`{"provider":%q,"repo":"acme/api","number":7%s}`, tc.p, typ)), now: t0}
			all := &stream{t: t, w: w, pred: canon(t, w, fmt.Sprintf(`{"provider":%q,"repo":"acme/api","number":7%s,"bots":true}`, tc.p, typ)), now: t0}
			people.probe()
			all.probe()
			srv.EditTicket("acme/api", 7, tc.p == forge.GitLab, func(tk *forgetest.Ticket) {
				tk.Comments = append(tk.Comments, tc.bots...)
				tk.Via = map[int]string{}
				for i, app := range tc.via {
					tk.Via[i] = app
				}
			})
			if obs := people.probe(); obs.Verdict != vigil.VerdictPending || obs.Facts["human_comments"] != 1 {
				t.Fatalf("comments by bots: %+v, want no change", obs)
			}
			if obs := all.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != "2 new comments" {
				t.Fatalf(`comments by bots with "bots": true: %+v, want 2 new comments`, obs)
			}
		})
	}
}

// TestReviewsWake: a pull request review (and its review comments)
// wakes the watch, saying who asked for what; a pending review, a review
// by a bot and one by vigil's own login do not.
func TestReviewsWake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p                   forge.Provider
		changes, other, bot string
		want                string
	}{
		{p: forge.GitHub, changes: "CHANGES_REQUESTED", other: "PENDING", bot: "renovate[bot]", want: "1 new review (changes requested by ada); 2 new review comments"},
		{p: forge.Gitea, changes: "REQUEST_CHANGES", other: "PENDING", bot: "gitea-actions", want: "1 new review (changes requested by ada); 2 new review comments"},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, tc.p)
			w := setup(t, srv)
			srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "Fix", State: "open", Pull: true})
			s := &stream{t: t, w: w, pred: canon(t, w, fmt.Sprintf(`{"provider":%q,"repo":"acme/api","number":7}`, tc.p)), now: t0}
			if base := s.probe(); base.Facts["reviews"] != 0 || base.Facts["review_comments"] != 0 {
				t.Fatalf("baseline = %+v", base)
			}
			srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) {
				tk.Reviews = append(tk.Reviews, forgetest.Review{User: "bob", State: tc.other, Comments: 1},
					forgetest.Review{User: tc.bot, State: tc.changes}, forgetest.Review{User: vigilo, State: tc.changes})
			})
			if obs := s.probe(); obs.Verdict != vigil.VerdictPending {
				t.Fatalf("a pending review, a bot's and vigil's own: %+v, want no change", obs)
			}
			srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) {
				tk.Reviews = append(tk.Reviews, forgetest.Review{User: "ada", State: tc.changes, Comments: 2})
			})
			obs := s.probe()
			if obs.Verdict != vigil.VerdictSatisfied || obs.Summary != tc.want {
				t.Fatalf("a review requesting changes: %s %q, want satisfied %q", obs.Verdict, obs.Summary, tc.want)
			}
			if obs.Facts["latest_review"] != "changes requested by ada" {
				t.Fatalf("facts latest_review = %v", obs.Facts["latest_review"])
			}
		})
	}
}

func TestBotsCanonical(t *testing.T) {
	t.Parallel()
	w := ticket.New(ticket.Config{})
	for in, want := range map[string]string{
		`{"repo":"acme/api","number":7,"bots":true}`:  `{"bots":true,"number":7,"provider":"github","repo":"acme/api"}`,
		`{"repo":"acme/api","number":7,"bots":false}`: `{"number":7,"provider":"github","repo":"acme/api"}`,
	} {
		if got := canon(t, w, in); string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestBaselineWithoutReviewFacts: a baseline recorded before reviews
// were read still compares; its reviews are taken as they are now,
// silently, and the next change is reported against them.
func TestBaselineWithoutReviewFacts(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	w := setup(t, srv)
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "A", State: "open", Pull: true, Reviews: []forgetest.Review{{User: "ada", State: "APPROVED"}}})
	s := &stream{t: t, w: w, pred: canon(t, w, `{"repo":"acme/api","number":7}`), now: t0}
	base := s.probe()
	for _, k := range []string{"reviews", "review_comments", "latest_review"} {
		delete(s.last.Facts, k)
	}
	if obs := s.probe(); obs.Verdict != vigil.VerdictPending || obs.Facts["reviews"] != 1 {
		t.Fatalf("against an old baseline: %+v, want a silent pending with the reviews", obs)
	}
	srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) {
		tk.Title = "B"
		tk.Reviews = append(tk.Reviews, forgetest.Review{User: "bob", State: "COMMENTED", Comments: 1})
	})
	if obs := s.probe(); obs.Verdict != vigil.VerdictSatisfied || obs.Summary != `title: "A" → "B"; 1 new review (commented by bob); 1 new review comment` {
		t.Fatalf("the next change: %+v (baseline %+v)", obs, base)
	}
}
