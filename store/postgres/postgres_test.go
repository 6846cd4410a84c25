package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/storetest"
)

// newSchema creates an empty schema for t, dropped at its cleanup, and
// returns a URL whose search_path names it.
func newSchema(t testing.TB) string {
	t.Helper()
	return pgtest.Schema(t, "vigil_test")
}

// admin runs one statement on its own connection.
func admin(t testing.TB, u, stmt string, args ...any) {
	t.Helper()
	pgtest.Exec(t, u, stmt, args...)
}

func open(t testing.TB, u string) *postgres.Store {
	t.Helper()
	return openWith(t, u, &postgres.Options{MaxConns: 4})
}

func openWith(t testing.TB, u string, o *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u, o)
	if err != nil {
		t.Fatalf("Open error = %v", err)
	}
	return s
}

// TestConformance runs the suite on stores that send events (Notify), the
// path with the most statements; the replica tests use stores that do not.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (vigil.Store, func() vigil.Store) {
		u := newSchema(t)
		var mu sync.Mutex
		open := func(t testing.TB, u string) *postgres.Store {
			return openWith(t, u, &postgres.Options{MaxConns: 4, Notify: true})
		}
		cur := open(t, u)
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			cur.Close()
		})
		reopen := func() vigil.Store {
			mu.Lock()
			defer mu.Unlock()
			cur.Close()
			cur = open(t, u)
			return cur
		}
		return cur, reopen
	})
}

func TestRefusesNewerSchema(t *testing.T) {
	u := newSchema(t)
	open(t, u).Close()
	admin(t, u, "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", postgres.SchemaVersion()+1)
	_, err := postgres.Open(t.Context(), u, nil)
	if !errors.Is(err, postgres.ErrSchemaNewer) {
		t.Fatalf("Open of a newer schema error = %v, want ErrSchemaNewer", err)
	}
}

func TestOpenTwiceMigratesOnce(t *testing.T) {
	u := newSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), u, nil)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d of 4 started together: %v", i, err)
		}
	}
}

func TestOpenHidesPassword(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://u:s3cret@127.0.0.1:1/x?sslmode=bogus", nil)
	if err == nil {
		t.Fatal("Open of a bad URL: no error")
	}
	if got := err.Error(); strings.Contains(got, "s3cret") {
		t.Errorf("Open error %q repeats the password", got)
	}
}

// TestOpenWarnsWithoutTrigramIndexes: a schema whose text-filter indexes
// are missing (schema 5 applied where pg_trgm was unavailable) opens, with
// a warning; one that has them opens without.
func TestOpenWarnsWithoutTrigramIndexes(t *testing.T) {
	u := newSchema(t)
	logs := func() string {
		var buf bytes.Buffer
		s := openWith(t, u, &postgres.Options{MaxConns: 2, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		s.Close()
		return buf.String()
	}
	if got := logs(); strings.Contains(got, "pg_trgm") {
		t.Errorf("Open with the trigram indexes logged %q", got)
	}
	admin(t, u, "DROP INDEX watch_text_predicate_trgm")
	if got := logs(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "pg_trgm") {
		t.Errorf("Open without the trigram indexes logged %q, want a warning naming pg_trgm", got)
	}
}

// TestOpenRefusesMissingSchema: a store URL whose search_path names no
// schema that exists is refused saying so. current_schema() is NULL then,
// which failed to scan, and Open said only that it could not scan NULL
// into a string.
func TestOpenRefusesMissingSchema(t *testing.T) {
	u, err := url.Parse(newSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", q.Get("search_path")+"_missing")
	u.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), u.String(), nil)
	if err == nil {
		s.Close()
		t.Fatal("Open with a search_path naming no schema: no error")
	}
	if !strings.Contains(err.Error(), "search_path names no schema that exists") {
		t.Errorf("Open with a search_path naming no schema: %v, want it to say the schema does not exist", err)
	}
}
