package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vigil-run/vigil"
)

// TestOutcomeConflictNamesTheWatch: when one INSERT of several outcome
// messages breaks messages_outcome, the refusal names the watch the
// violation's detail names, not merely the first of the batch.
func TestOutcomeConflictNamesTheWatch(t *testing.T) {
	ms := []*vigil.Message{{WatchID: "01AAA"}, {}, {WatchID: "01BBB"}, {WatchID: "01CCC"}}
	violation := &pgconn.PgError{Code: "23505", ConstraintName: "messages_outcome",
		Detail: "Key (watch_id)=(01BBB) already exists."}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"the detail names the third", violation, "01BBB"},
		{"wrapped", fmt.Errorf("insert: %w", violation), "01BBB"},
		{"a detail naming none falls back to the first", &pgconn.PgError{Detail: "Key (watch_id)=(01ZZZ) already exists."}, "01AAA"},
		{"not a PostgreSQL error", errors.New("conn closed"), "01AAA"},
	} {
		if got := outcomeConflict(c.err, ms); got != c.want {
			t.Errorf("%s: outcomeConflict = %q, want %q", c.name, got, c.want)
		}
	}
	// A watch id that is a prefix of another must not match it.
	prefix := []*vigil.Message{{WatchID: "01B"}, {WatchID: "01BB"}}
	if got := outcomeConflict(&pgconn.PgError{Detail: "Key (watch_id)=(01BB) already exists."}, prefix); got != "01BB" {
		t.Errorf("outcomeConflict with a prefix id = %q, want 01BB", got)
	}
}
