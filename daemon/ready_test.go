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
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Roots = "127.0.0.1:0", t.TempDir(), []string{t.TempDir()}
	d, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable},
		{"/v1/watches", http.StatusServiceUnavailable},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://localhost"+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+d.Token())
		rec := httptest.NewRecorder()
		d.srv.Handler.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("GET %s before Run = %d, want %d (%s)", tc.path, rec.Code, tc.want, rec.Body)
		}
	}
	if d.Ready() {
		t.Error("Ready() = true before Run")
	}
}
