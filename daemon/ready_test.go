package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestNotReadyUntilPrimed serves requests through the daemon's handler
// before Run has loaded the pending watches: /readyz and the API answer
// 503, /healthz 200.
func TestNotReadyUntilPrimed(t *testing.T) {
	t.Parallel()
	d := unstarted(t)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable},
		{"/v1/watches", http.StatusServiceUnavailable},
	} {
		rec := d.get(tc.path)
		if rec.Code != tc.want {
			t.Errorf("GET %s before Run = %d, want %d (%s)", tc.path, rec.Code, tc.want, rec.Body)
		}
	}
	if d.Ready() {
		t.Error("Ready() = true before Run")
	}
}

// unstarted is a daemon made, and closed when the test ends, but not run:
// its handler serves requests through get.
func unstarted(t *testing.T) *Daemon {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Roots = "127.0.0.1:0", t.TempDir(), []string{t.TempDir()}
	d, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// get serves GET target (a path and query) with the admin token through
// d's handler.
func (d *Daemon) get(target string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://localhost"+target, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token())
	rec := httptest.NewRecorder()
	d.srv.Handler.ServeHTTP(rec, req)
	return rec
}
