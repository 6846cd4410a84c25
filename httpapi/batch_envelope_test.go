package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/httpapi"
)

// TestBatchEnvelope: a batch over 1 000 items or over the body bound is
// refused whole with payload_too_large; an item that is not an object is
// answered in its place.
func TestBatchEnvelope(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.MaxBodyBytes = 64 << 10 })
	item := `{"kind":"timer","predicate":{"in":"1m"},"recipient":"amy"}`
	many := `{"watches":[` + strings.Repeat(`1,`, 1000) + `1]}`
	resp, b := e.do(t, request{method: "POST", path: "/v1/watches/batch", body: many})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || decodeError(t, b).Code != "payload_too_large" {
		t.Errorf("1 001 items: %s %s, want 413 payload_too_large", resp.Status, b)
	}
	big := `{"watches":[` + item + `,` + `{"kind":"timer","note":"` + strings.Repeat("x", 70<<10) + `"}]}`
	resp, b = e.do(t, request{method: "POST", path: "/v1/watches/batch", body: big})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || decodeError(t, b).Code != "payload_too_large" {
		t.Errorf("over the bound: %s %.200s, want 413 payload_too_large", resp.Status, b)
	}
	resp, b = e.do(t, request{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + item + `, 7, "x", null, [], ` + item + `]}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mixed: %s %s", resp.Status, b)
	}
	var out struct {
		Results []struct {
			Status string    `json:"status"`
			Error  *apiError `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 6 {
		t.Fatalf("mixed: %s, %v", b, err)
	}
	for i := 1; i <= 4; i++ {
		if r := out.Results[i]; r.Status != "refused" || r.Error == nil || r.Error.Code != "invalid_request" {
			t.Errorf("item %d = %+v, want refused invalid_request", i, r)
		}
	}
}
