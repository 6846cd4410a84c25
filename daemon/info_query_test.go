package daemon

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestDaemonInfoRefusesUnknownQuery: docs/api.md, "A route refuses a
// parameter it does not take ... 422 invalid_request"; GET /v1/daemon
// takes none, as every route of the table (its handler is mounted beside
// them).
func TestDaemonInfoRefusesUnknownQuery(t *testing.T) {
	t.Parallel()
	d := unstarted(t)
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", http.StatusOK},
		{"?verbose=true", http.StatusUnprocessableEntity},
		{"?%zz", http.StatusUnprocessableEntity},
	} {
		rec := d.get("/v1/daemon" + tc.query)
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
