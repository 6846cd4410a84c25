package daemon_test

import (
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestPostgresReadyzStore: a replica whose schema cannot be read (renamed
// away under it) answers /readyz 503 with a stable body once its cached
// answer is past, by an injected clock, and 200 again once the schema is
// back; within the cache's second it answers from the cache.
func TestPostgresReadyzStore(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	base := pgtest.URL(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = store
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC).UnixNano())
	d.SetReadyClock(func() time.Time { return time.Unix(0, now.Load()) })
	r := daemontest.Run(t, d)
	later := func() { now.Add(int64(2 * time.Second)) }
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(r.URL() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s, want 200", code, body)
	}

	pgtest.Exec(t, base, "ALTER SCHEMA "+schema+" RENAME TO "+schema+"_gone")
	renamed := true
	back := func() {
		if renamed {
			pgtest.Exec(t, base, "ALTER SCHEMA "+schema+"_gone RENAME TO "+schema)
			renamed = false
		}
	}
	t.Cleanup(back)
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("GET /readyz within the cached second = %d %s, want the cached 200", code, body)
	}
	later()
	const want = `{"error":{"code":"unavailable","message":"not ready: vigil cannot reach its database"}}` + "\n"
	if code, body := readyz(); code != http.StatusServiceUnavailable || body != want {
		t.Errorf("GET /readyz with the schema gone = %d %q, want 503 %q", code, body, want)
	}
	resp, err := http.Get(r.URL() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz with the schema gone = %v, %v; want 200", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}

	back()
	later()
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("GET /readyz with the schema back = %d %s, want 200", code, body)
	}
}
