package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestCaseFoldedDuplicateKey: encoding/json matches a key to a field
// ignoring case, so "recipient" and "RECIPIENT" are the same field given
// twice, and the last one silently wins. docs/api.md: "a key given twice
// at any depth is refused with 422 invalid_request" — on the single route
// and on a batch item alike.
func TestCaseFoldedDuplicateKey(t *testing.T) {
	e := newEnv(t)
	body := `{"kind":"timer","predicate":{"in":"1m"},"recipient":"amy","RECIPIENT":"bob"}`
	resp, b := e.do(t, request{method: "POST", path: "/v1/watches", body: body})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		e.fake.mu.Lock()
		got := e.fake.registered
		e.fake.mu.Unlock()
		t.Fatalf("POST /v1/watches %s: status %d (%s), registered %+v; want 422 invalid_request (key given twice)", body, resp.StatusCode, b, got)
	}
	if c := decodeError(t, b).Code; c != vigil.CodeInvalidRequest {
		t.Errorf("code = %s, want invalid_request", c)
	}

	resp, b = e.do(t, request{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + body + `]}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("batch: status %d %s", resp.StatusCode, b)
	}
	var out struct {
		Results []struct {
			Status string    `json:"status"`
			Error  *apiError `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("batch answer %s: %v", b, err)
	}
	if r := out.Results[0]; r.Status != vigil.BatchRefused || r.Error == nil || r.Error.Code != vigil.CodeInvalidRequest {
		t.Errorf("batch item %s answered %s, want refused invalid_request (key given twice)", body, b)
	}
}
