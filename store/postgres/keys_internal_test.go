package postgres

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestKeysMigrationFromSchema8: schema 9 applies to a database at schema
// 8 on which a replica of the build before runs (its row in replicas, a
// live lease, no fingerprints), and that replica is not compared: the
// first replica of this build to start records its fingerprints beside
// it, and the older one's heartbeat and leave, which never name
// replica_keys, go on as before.
func TestKeysMigrationFromSchema8(t *testing.T) {
	u := pgtest.Schema(t, "vigil_test")
	ctx := t.Context()
	pool := migrateTo(t, u, 8)
	// The older replica, live: what its heartbeat writes.
	if _, err := pool.Exec(ctx, `INSERT INTO replicas (id, seen_at, started_at, lease_until) VALUES ('old', now(), now(), now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}

	s, err := Open(context.Background(), u, &Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open of a schema-8 database: %v", err)
	}
	defer s.Close()
	var v int64
	if err := pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil || v < 9 {
		t.Fatalf("schema version after Open = %d (%v), want 9 or later", v, err)
	}
	var seen []PeerKeys
	if err := s.RecordKeys(ctx, "new", KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210"}, time.Minute,
		func(peers []PeerKeys) error { seen = peers; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("the new replica's check saw %+v, want nobody: the older replica records no fingerprints", seen)
	}
	var webhook []string
	var link string
	if err := pool.QueryRow(ctx, `SELECT webhook, link FROM replica_keys WHERE replica = 'new'`).Scan(&webhook, &link); err != nil ||
		len(webhook) != 1 || webhook[0] != "0123456789abcdef" || link != "fedcba9876543210" {
		t.Errorf("recorded %v, %q (%v); want the new replica's fingerprints", webhook, link, err)
	}
	// The older build's statements, which name only what schema 8 has.
	for _, stmt := range []string{
		`UPDATE replicas SET seen_at = now(), lease_until = now() + interval '1 minute' WHERE id = 'old'`,
		`DELETE FROM replicas WHERE id = 'old'`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Errorf("an older replica's %q on schema 9: %v", stmt, err)
		}
	}
}

// migrateTo applies the migrations up to version to the schema of u, as a
// build of that schema left it, and returns a pool on it.
func migrateTo(t *testing.T, u string, version int64) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestSettingsMigrationFromSchema9: schema 10 applies to a database at
// schema 9 on which a replica of the build before runs (its fingerprints
// recorded, no settings), and that replica is not compared on settings:
// the check of a replica of this build sees its settings empty. The older
// replica's own statements, which name only schema 9's columns, go on
// working: it records again (NULL settings) and reads its peers.
func TestSettingsMigrationFromSchema9(t *testing.T) {
	u := pgtest.Schema(t, "vigil_test")
	ctx := t.Context()
	pool := migrateTo(t, u, 9)
	// The schema-9 build's recording, verbatim.
	const oldRecord = `INSERT INTO replica_keys (replica, webhook, link, recorded_at, start_until)
			VALUES ($1, $2, $3, now(), now() + $4::interval)
			ON CONFLICT (replica) DO UPDATE SET webhook = EXCLUDED.webhook, link = EXCLUDED.link,
				recorded_at = EXCLUDED.recorded_at, start_until = EXCLUDED.start_until`
	if _, err := pool.Exec(ctx, oldRecord, "old", []string{"0123456789abcdef"}, "fedcba9876543210", time.Minute); err != nil {
		t.Fatal(err)
	}

	s, err := Open(context.Background(), u, &Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open of a schema-9 database: %v", err)
	}
	defer s.Close()
	var seen []PeerKeys
	if err := s.RecordKeys(ctx, "new", KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210", Settings: "a.b.c"}, time.Minute,
		func(peers []PeerKeys) error { seen = peers; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Replica != "old" || seen[0].Settings != "" {
		t.Fatalf("the new replica's check saw %+v, want old with no settings", seen)
	}
	var settings *string
	if err := pool.QueryRow(ctx, `SELECT settings FROM replica_keys WHERE replica = 'new'`).Scan(&settings); err != nil || settings == nil || *settings != "a.b.c" {
		t.Errorf("recorded settings %v (%v), want a.b.c", settings, err)
	}
	// The older build's statements, which name only what schema 9 has.
	if _, err := pool.Exec(ctx, oldRecord, "old", []string{"0123456789abcdef"}, "fedcba9876543210", time.Minute); err != nil {
		t.Errorf("an older replica's recording on schema 10: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT k.replica, k.webhook, k.link FROM replica_keys AS k
		LEFT JOIN replicas AS r ON r.id = k.replica WHERE k.replica <> 'old') AS peers`).Scan(&n); err != nil || n != 1 {
		t.Errorf("an older replica's read of its peers on schema 10: %d rows (%v), want 1", n, err)
	}
}
