package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestPoolStaysOpen: the pool opens its connections when the store opens
// and keeps them, so that a burst does not first start a backend for each;
// pool_min_conns in the URL still says otherwise.
func TestPoolStaysOpen(t *testing.T) {
	u := pgtest.Schema(t, "vigil_pool")
	s, err := Open(t.Context(), u, &Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.pool.Config().MinConns; got != 3 {
		t.Fatalf("MinConns = %d, want the pool's size, 3", got)
	}
	// pgxpool opens them in the background.
	for deadline := time.Now().Add(10 * time.Second); s.pool.Stat().TotalConns() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d connections 10 s after the store opened, want 3", s.pool.Stat().TotalConns())
		}
		time.Sleep(10 * time.Millisecond)
	}

	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s2, err := Open(t.Context(), u+sep+"pool_min_conns=1", &Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.pool.Config().MinConns; got != 1 {
		t.Errorf("with pool_min_conns=1 in the URL, MinConns = %d, want 1", got)
	}
}
