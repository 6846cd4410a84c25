package sqlite

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestUnreadableRows: a row with a column that does not decode (labels
// that are not JSON, a time that is text, a predicate that is not JSON,
// a settled row's outcome) never breaks reading the others: lists, gets
// and the pending list return it with its id and the reason, and it can
// still be settled.
func TestUnreadableRows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	ctx := t.Context()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"w1", "w2", "w3", "w4", "w5", "w6"} {
		pred := json.RawMessage(`{"url":"https://example.com/` + id + `"}`)
		w := &vigil.Watch{ID: id, Kind: vigil.KindHTTP, Predicate: pred, Recipient: "r", Mode: vigil.ModeUntil, Every: 10 * time.Second,
			Deadline: at.Add(time.Hour), CreatedAt: at.Add(time.Duration(i) * time.Second), Labels: map[string]string{"n": id},
			Identity: vigil.Identity("r", vigil.KindHTTP, vigil.ModeUntil, pred)}
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w6", State: vigil.StateFired, SettledAt: at.Add(time.Minute),
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "done", Reason: "satisfied"}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := openRaw(t, path)
	for _, q := range []string{
		`UPDATE watches SET labels = '{"n": bad' WHERE id = 'w1'`,
		`UPDATE watches SET created_at = 'yesterday' WHERE id = 'w2'`,
		`UPDATE watches SET deadline = 'soon' WHERE id = 'w3'`,
		`UPDATE watches SET predicate = 'not json' WHERE id = 'w4'`,
		`UPDATE watches SET outcome = '[' WHERE id = 'w6'`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	s = open(t, path, nil)
	defer s.Close()

	bad := map[string]string{"w1": "labels", "w2": "created_at", "w3": "deadline", "w4": "predicate", "w6": "outcome"}
	check := func(what string, ws []*vigil.Watch) {
		t.Helper()
		if len(ws) != 6 {
			t.Fatalf("%s returned %d watches, want all 6", what, len(ws))
		}
		for _, w := range ws {
			col, isBad := bad[w.ID]
			switch {
			case isBad && !strings.Contains(w.Unreadable, col):
				t.Errorf("%s: watch %s unreadable %q, want the reason to name %s", what, w.ID, w.Unreadable, col)
			case !isBad && w.Unreadable != "":
				t.Errorf("%s: watch %s unreadable %q, want it read in full", what, w.ID, w.Unreadable)
			}
			if w.Recipient != "r" || w.Kind != vigil.KindHTTP {
				t.Errorf("%s: watch %s lost what could be read: %+v", what, w.ID, w)
			}
			if _, err := json.Marshal(w); err != nil {
				t.Errorf("%s: watch %s cannot be shown: %v", what, w.ID, err)
			}
		}
	}
	page, err := s.WatchList(ctx, vigil.WatchListParams{})
	if err != nil {
		t.Fatalf("WatchList with unreadable rows: %v", err)
	}
	check("WatchList", page.Watches)
	many, err := s.WatchGetMany(ctx, []string{"w1", "w2", "w3", "w4", "w5", "w6"})
	if err != nil {
		t.Fatalf("WatchGetMany with unreadable rows: %v", err)
	}
	check("WatchGetMany", many)
	var got []*vigil.Watch
	for id := range bad {
		w, err := s.WatchGet(ctx, id)
		if err != nil {
			t.Fatalf("WatchGet(%s): %v", id, err)
		}
		got = append(got, w)
	}
	w5, err := s.WatchGet(ctx, "w5")
	if err != nil {
		t.Fatal(err)
	}
	check("WatchGet", append(got, w5))

	pending, err := s.WatchListPending(ctx)
	if err != nil {
		t.Fatalf("WatchListPending with unreadable rows: %v", err)
	}
	if len(pending) != 5 {
		t.Fatalf("WatchListPending returned %d entries, want 5", len(pending))
	}
	for _, e := range pending {
		if want := e.ID == "w3" || e.ID == "w2"; want != (e.Unreadable != "") {
			t.Errorf("WatchListPending: %s unreadable %q", e.ID, e.Unreadable)
		}
	}
	won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w1", State: vigil.StateErrored, SettledAt: at.Add(time.Minute),
		Outcome: &vigil.Outcome{State: vigil.StateErrored, Sentence: "unreadable", Reason: "unreadable"},
		Message: &vigil.Message{ID: "m1", Text: "unreadable"}}})
	if err != nil || !won[0] {
		t.Fatalf("settling an unreadable watch: %v, %v", won, err)
	}
}

// TestPruneDeletesARowOfNoState: a settled row whose state was written by
// hand as none of a watch's is pruned like the others, and the counts stay
// those of the watches: no count held it (schema 15 has a column for each
// state), so its deletion takes from none, and does not fail the prune.
func TestPruneDeletesARowOfNoState(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	ctx := t.Context()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"w1", "w2", "w3"} {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch(id, "r")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w1", State: vigil.StateFired, SettledAt: at},
		{ID: "w2", State: vigil.StateFired, SettledAt: at}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := openRaw(t, path)
	if _, err := raw.Exec(`UPDATE watches SET state = 'lost' WHERE id = 'w1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE watch_counts SET fired = fired - 1 WHERE recipient = 'r'`); err != nil {
		t.Fatal(err) // the hand that wrote the state kept the counts true
	}
	raw.Close()
	s = open(t, path, nil)
	defer s.Close()
	got, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: at.Add(time.Hour)})
	if err != nil || got.Watches != 2 {
		t.Fatalf("Prune = %d watches, %v; want 2, nil", got.Watches, err)
	}
	checkCounters(t, s)
	cs, err := s.WatchCounts(ctx, nil)
	if err != nil || len(cs) != 1 || cs[0] != (vigil.WatchCount{State: vigil.StatePending, Kind: vigil.KindTimer, N: 1}) {
		t.Errorf("WatchCounts after the prune = %v, %v; want one pending timer", cs, err)
	}
}
