package sqlite

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/vigil-run/vigil/store/storetest"
)

// schemaVersions lists the versions of this build's migrations, in order.
func schemaVersions(t *testing.T) []int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int64
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// TestUpgradeFromEverySchema: a database written at each older schema,
// holding the rows a daemon keeps (pending watches, a settled one with its
// outcome message and receipt, a note, a reader's cursor, a scoped token),
// is migrated by Open, and every row then reads back as it was written;
// its pending watches are re-armed and fire (storetest.CheckUpgradedRows),
// and the counters match the rows.
//
// The database at schema v is one written at this build's schema and
// taken down to v by the migrations' own Down sections, which drop
// what v did not have (the receipts table below schema 2, the tokens
// below 3, the side tables and counters their migrations rebuild).
func TestUpgradeFromEverySchema(t *testing.T) {
	versions := schemaVersions(t)
	if versions[len(versions)-1] != SchemaVersion() {
		t.Fatalf("versions %v, SchemaVersion %d", versions, SchemaVersion())
	}
	for _, v := range versions[:len(versions)-1] {
		t.Run(fmt.Sprint("schema", v), func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "vigil.db")
			s := open(t, path, nil)
			storetest.WriteUpgradeRows(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			db := openRaw(t, path)
			fsys, err := fs.Sub(migrationFiles, "migrations")
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.DownTo(ctx, v); err != nil {
				t.Fatalf("down to %d: %v", v, err)
			}
			if cur, err := p.GetDBVersion(ctx); err != nil || cur != v {
				t.Fatalf("down to %d: at %d, %v", v, cur, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			s = open(t, path, nil)
			defer s.Close()
			checkCounters(t, s)
			storetest.CheckUpgradedRows(t, s, v >= 2, v >= 3)
			checkCounters(t, s)
		})
	}
}
