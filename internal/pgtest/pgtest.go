// Package pgtest gives tests a PostgreSQL schema of their own on the test
// database named by VIGIL_TEST_POSTGRES. Only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable that holds the test database's
// URL, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvURL = "VIGIL_TEST_POSTGRES"

// URL returns the test database's URL. Without one it skips t, or fails
// it under CI (CI set), which always provides one: PostgreSQL tests must
// not pass there by being skipped.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is empty under CI: the PostgreSQL tests must run there (start PostgreSQL and export %s=postgres://…)", EnvURL, EnvURL)
		}
		t.Skipf("%s is not set: this test needs a PostgreSQL database (e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", EnvURL, EnvURL)
	}
	return u
}

// Schema creates an empty schema named prefix_<random hex>, dropped with
// everything in it at t's cleanup, and returns the test database's URL
// with search_path set to it.
func Schema(t testing.TB, prefix string) string {
	t.Helper()
	base := URL(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := prefix + "_" + hex.EncodeToString(b[:])
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s does not parse: %v", EnvURL, err)
	}
	Exec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { Exec(t, base, "DROP SCHEMA "+schema+" CASCADE") })
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Exec runs one statement on a connection of its own to u, failing t if
// it cannot.
func Exec(t testing.TB, u, stmt string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// Lapse makes replica's lease lapse, as if it had been frozen past it:
// its lease_until, which a lease renewed as a row lapses at, is set ago
// into the past, and its lease session, if it has one (store/postgres,
// schema 13), is ended the way the server ends a session idle past its
// idle_session_timeout, its lock with it (pg_terminate_backend waits up to
// 5 s for the backend to exit).
func Lapse(t testing.TB, u, replica string, ago time.Duration) {
	t.Helper()
	Exec(t, u, `UPDATE replicas SET lease_until = now() - $2::interval WHERE id = $1`, replica, ago)
	Exec(t, u, `SELECT pg_terminate_backend(l.pid, 5000) FROM pg_locks AS l
		JOIN replicas AS r ON (l.classid::bigint << 32 | l.objid::bigint) = r.lock_key
		WHERE r.id = $1 AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted`, replica)
}
