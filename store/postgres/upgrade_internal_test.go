package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/storetest"
)

// TestUpgradeFromEverySchema: a schema written at each older version,
// holding the rows a daemon keeps (pending watches, a settled one with its
// outcome message and receipt, a note, a reader's cursor, a scoped token),
// is migrated by Open, and every row then reads back as it was written;
// its pending watches are re-armed and fire (storetest.CheckUpgradedRows).
// The schema at version v is one written at this build's and taken down
// to v by the migrations' own Down sections.
func TestUpgradeFromEverySchema(t *testing.T) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range versions[:len(versions)-1] {
		t.Run(fmt.Sprint("schema", v), func(t *testing.T) {
			ctx := t.Context()
			u := pgtest.Schema(t, "vigil_test")
			s, err := Open(context.Background(), u, &Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			storetest.WriteUpgradeRows(t, s)
			s.Close()

			pool, err := pgxpool.New(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			fsys, err := fs.Sub(migrationFiles, "migrations")
			if err != nil {
				t.Fatal(err)
			}
			db := stdlib.OpenDBFromPool(pool)
			p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.DownTo(ctx, v); err != nil {
				t.Fatalf("down to %d: %v", v, err)
			}
			if cur, err := p.GetDBVersion(ctx); err != nil || cur != v {
				t.Fatalf("down to %d: at %d, %v", v, cur, err)
			}
			db.Close()
			pool.Close()

			s, err = Open(context.Background(), u, &Options{MaxConns: 4})
			if err != nil {
				t.Fatalf("Open of a schema at %d: %v", v, err)
			}
			defer s.Close()
			storetest.CheckUpgradedRows(t, s, true, true)
		})
	}
}
