package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestRefusesSchemaMigratedPastItMeanwhile: a replica of an older build
// that starts while a newer replica migrates the schema past what it
// knows is refused (ErrSchemaNewer), as one that starts after is. It read
// the version before taking the migrations' lock, found one it knew, and
// once the lock was its own Up found nothing it knew to apply: it started
// on the newer schema without a word.
func TestRefusesSchemaMigratedPastItMeanwhile(t *testing.T) {
	u := pgtest.Schema(t, "vigil_test")
	s, err := Open(context.Background(), u, &Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Cleanup(func() { afterVersionCheck = nil })
	// The newer replica's migration, between this one's reading of the
	// version and its Up.
	afterVersionCheck = func() {
		pgtest.Exec(t, u, "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", SchemaVersion()+1)
	}
	s, err = Open(context.Background(), u, &Options{MaxConns: 2})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open while a newer replica migrated: %v, want ErrSchemaNewer", err)
	}
}
