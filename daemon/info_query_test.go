package daemon

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDaemonInfoRefusesUnknownQuery: docs/api.md, "A route refuses a
// parameter it does not take ... 422 invalid_request"; GET /v1/daemon
// takes none, as every route of the table (its handler is mounted beside
// them).
func TestDaemonInfoRefusesUnknownQuery(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Roots = "127.0.0.1:0", t.TempDir(), []string{t.TempDir()}
	d, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", http.StatusOK},
		{"?verbose=true", http.StatusUnprocessableEntity},
		{"?%zz", http.StatusUnprocessableEntity},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://localhost/v1/daemon"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+d.Token())
		rec := httptest.NewRecorder()
		d.srv.Handler.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("GET /v1/daemon%s = %d %s, want %d", tc.query, rec.Code, rec.Body, tc.want)
			continue
		}
		if tc.want == http.StatusOK {
			continue
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != "invalid_request" {
			t.Errorf("GET /v1/daemon%s answered %s, want invalid_request", tc.query, rec.Body)
		}
	}
}
