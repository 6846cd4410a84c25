package postgres_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// upSection returns the statements of a goose migration's Up part, with
// the comments taken out.
func upSection(sql string) []string {
	_, up, _ := strings.Cut(sql, "-- +goose Up")
	up, _, _ = strings.Cut(up, "-- +goose Down")
	var (
		out   []string
		b     strings.Builder
		block bool // inside StatementBegin … StatementEnd: one statement
	)
	emit := func(stmt string) {
		if stmt = strings.Join(strings.Fields(stmt), " "); stmt != "" {
			out = append(out, stmt)
		}
	}
	flush := func() {
		for stmt := range strings.SplitSeq(b.String(), ";") {
			emit(stmt)
		}
		b.Reset()
	}
	for line := range strings.SplitSeq(up, "\n") {
		switch strings.TrimSpace(line) {
		case "-- +goose StatementBegin":
			flush()
			block = true
			continue
		case "-- +goose StatementEnd":
			emit(b.String())
			b.Reset()
			block = false
			continue
		}
		line, _, _ = strings.Cut(line, "--")
		b.WriteString(line + "\n")
	}
	if !block {
		flush()
	}
	return out
}

// clauses splits a statement at the commas outside parentheses.
func clauses(stmt string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range stmt {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, stmt[start:i])
				start = i + 1
			}
		}
	}
	return append(out, stmt[start:])
}

var (
	forbidden = regexp.MustCompile(`(?i)\b(DROP|RENAME|ALTER COLUMN|ADD CONSTRAINT|TRUNCATE|DELETE FROM|UPDATE)\b`)
	// An index no release names in a statement may be dropped: an older
	// release's statements run on without it (planned otherwise).
	dropIndex = regexp.MustCompile(`(?i)^\s*DROP\s+INDEX\s+(IF\s+EXISTS\s+)?(\w+)\s*$`)
	addColumn = regexp.MustCompile(`(?i)\bADD COLUMN\b`)
	notNull   = regexp.MustCompile(`(?i)\bNOT NULL\b`)
	filled    = regexp.MustCompile(`(?i)\b(DEFAULT|GENERATED)\b`)
	// A new trigger or trigger function adds: it keeps tables of its own
	// (watch_counts) in step with what every release writes, so the words
	// UPDATE or DELETE in it name the events it fires on or its own rows.
	routine = regexp.MustCompile(`(?is)^\s*CREATE\s+(OR\s+REPLACE\s+)?(TRIGGER|FUNCTION)\b`)
)

// droppable are the indexes no release of the store names in a statement
// (they only serve the planner): dropping one leaves an older release
// slower, never failing. Add one here only after checking every release's
// statements.
var droppable = map[string]bool{
	// Schema 4's list filter indexes, moved to watch_text by schema 5
	// (trigramWarning of the schema-4 release names the trigram ones in
	// to_regclass, to warn when they are missing, which it then does).
	"watches_labels": true, "watches_note_trgm": true, "watches_predicate_trgm": true,
	// Schema 7: no release names it; only a comment did (git log -S).
	"watches_pending_created": true,
}

// onlyAdds returns why stmt is not a change a replica running the release
// before tolerates ("" if it is): it may create tables and indexes, add
// columns that are nullable or filled by a default, and insert rows; it
// may not drop, rename, alter or constrain what exists, nor change rows.
func onlyAdds(stmt string) string {
	if routine.MatchString(stmt) {
		return ""
	}
	if m := dropIndex.FindStringSubmatch(stmt); m != nil {
		if droppable[m[2]] {
			return ""
		}
		return "DROP INDEX " + m[2] + ": not an index that no release names"
	}
	if m := forbidden.FindString(stmt); m != "" {
		return m + " changes what an older release reads or writes"
	}
	for _, c := range clauses(stmt) {
		if addColumn.MatchString(c) && notNull.MatchString(c) && !filled.MatchString(c) {
			return "a NOT NULL column without a default fails an older release's inserts"
		}
	}
	return ""
}

// TestMigrationsOnlyAdd holds every migration after the first to the rule
// that lets replicas be upgraded one at a time (docs/operations.md): it
// only adds, so the replicas still on the release before run on.
func TestMigrationsOnlyAdd(t *testing.T) {
	t.Parallel()
	for stmt, want := range map[string]bool{
		"CREATE TABLE t (a TEXT NOT NULL PRIMARY KEY)":                                  true,
		"ALTER TABLE w ADD COLUMN s TEXT, ADD COLUMN at BIGINT NOT NULL DEFAULT 0":      true,
		"ALTER TABLE w ADD COLUMN n INT GENERATED ALWAYS AS (f(id, 2)) STORED":          true,
		"INSERT INTO meta (key, value) VALUES ('shards', 64)":                           true,
		"ALTER TABLE w ADD COLUMN s TEXT NOT NULL":                                      false,
		"ALTER TABLE w DROP COLUMN s":                                                   false,
		"ALTER TABLE w RENAME COLUMN s TO t":                                            false,
		"ALTER TABLE w ALTER COLUMN s SET NOT NULL":                                     false,
		"ALTER TABLE w ADD CONSTRAINT c CHECK (a > 0)":                                  false,
		"UPDATE w SET s = 'x'":                                                          false,
		"CREATE TRIGGER c AFTER UPDATE OF state ON w FOR EACH ROW EXECUTE FUNCTION f()": true,
		"DROP TRIGGER c ON w":                                                           false,
		"DROP INDEX IF EXISTS watches_note_trgm":                                        true,
		"DROP INDEX watches_created":                                                    false,
	} {
		if got := onlyAdds(stmt) == ""; got != want {
			t.Errorf("onlyAdds(%q) allows = %v, want %v", stmt, got, want)
		}
	}
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "00001_") {
			continue // the first creates everything
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range upSection(string(b)) {
			if why := onlyAdds(stmt); why != "" {
				t.Errorf("%s: %q: %s", f, stmt, why)
			}
		}
	}
}
