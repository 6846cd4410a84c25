package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestFromSchema1ThenPrune: rows written at schema 1 are kept by every
// migration, their side tables rebuilt, and a prune of all of them leaves
// no side row or count behind.
func TestFromSchema1ThenPrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	db := openRaw(t, path)
	migrateTo(t, db, 1)
	ctx := t.Context()
	for i := range 6 {
		w := benchWatch(int64(i))
		w.Recipient = fmt.Sprintf("r%d", i%2)
		w.Labels = map[string]string{"k": fmt.Sprint(i)}
		w.Note = "Note " + fmt.Sprint(i)
		if i%2 == 1 {
			w.State, w.SettledAt = vigil.StateFired, benchAt
		}
		enc, err := encodeWatch(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO watches (`+schema1Columns+`) VALUES (`+placeholders(len(splitCols(schema1Columns)))+`)`, pick(enc.args(w), schema1Columns)...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE counters SET pending = 3 WHERE recipient = ''`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, path, nil)
	defer s.Close()
	checkCounters(t, s)
	var watches, text, labels, counted int
	q := `SELECT (SELECT count(*) FROM watches), (SELECT count(*) FROM watch_text), (SELECT count(*) FROM watch_labels),
		(SELECT coalesce(sum(pending+fired+failed+expired+cancelled+errored+unwatchable), 0) FROM watch_counts)`
	if err := s.readDB.QueryRowContext(ctx, q).Scan(&watches, &text, &labels, &counted); err != nil {
		t.Fatal(err)
	}
	if watches != 6 || text != 6 || labels != 6 || counted != 6 {
		t.Fatalf("after migrating: %d watches, %d text, %d labels, %d counted; want 6 each", watches, text, labels, counted)
	}
	if _, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: benchAt.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.readDB.QueryRowContext(ctx, q).Scan(&watches, &text, &labels, &counted); err != nil {
		t.Fatal(err)
	}
	if watches != 3 || text != 3 || labels != 3 || counted != 3 {
		t.Fatalf("after pruning: %d watches, %d text, %d labels, %d counted; want 3 each", watches, text, labels, counted)
	}
	checkCounters(t, s)
}

var schema1Set = map[string]bool{}

func init() {
	for _, c := range []string{"id", "recipient", "kind", "state", "identity", "created_at", "predicate", "mode", "every_ms",
		"deadline", "start_at", "settled_at", "polls", "standing", "note", "labels", "deliver", "stable", "stable_for_ms",
		"max_polls", "max_errors", "chain_depth", "token_id", "answered_at_creation", "last_observation", "outcome", "receipts"} {
		schema1Set[c] = true
	}
	var cols []string
	for _, c := range splitCols(watchColumns) {
		if schema1Set[c] {
			cols = append(cols, c)
		}
	}
	schema1Columns = strings.Join(cols, ", ")
}

var schema1Columns string

func splitCols(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

func pick(args []any, cols string) []any {
	keep := map[string]bool{}
	for _, c := range splitCols(cols) {
		keep[c] = true
	}
	var out []any
	for i, c := range splitCols(watchColumns) {
		if keep[c] {
			out = append(out, args[i])
		}
	}
	return out
}
