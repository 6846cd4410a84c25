package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestListLabelFilterField: a label filter whose key is not a label key is
// refused naming the query parameter at fault, label (docs/api.md: field
// names "the request field, header or query parameter at fault"), before
// the service is asked.
func TestListLabelFilterField(t *testing.T) {
	e := newEnv(t)
	resp, b := e.do(t, request{method: "GET", path: "/v1/watches?label=bad%20key=1"})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d %s, want 422", resp.StatusCode, b)
	}
	if got := decodeError(t, b); got.Code != vigil.CodeInvalidRequest || got.Field != "label" {
		t.Errorf("error %+v, want invalid_request on field label", got)
	}
	// A refusal of the service about the labels names the parameter too.
	e.fake.mu.Lock()
	e.fake.err = vigil.FieldErrorf(vigil.CodeInvalidRequest, "labels.team", "label \"team\" is longer than 256 bytes")
	e.fake.mu.Unlock()
	_, b = e.do(t, request{method: "GET", path: "/v1/watches?label=team=x"})
	if got := decodeError(t, b); got.Field != "label" {
		t.Errorf("service refusal answered %+v, want field label", got)
	}
}
