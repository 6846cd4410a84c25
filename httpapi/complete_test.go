package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

const completionToken = "01JDZK4V7Q3M2N8P5R6S7T8V9W.c2VjcmV0LXNlY3JldC0xMjM"

// TestComplete: the completion route needs no bearer token, takes an
// empty body as success, passes status and data through, and maps a used
// token to 409 and an unknown one to 404; the token never reaches a log.
func TestComplete(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e := newEnv(t, func(o *httpapi.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	noAuth := map[string]string{"Authorization": ""}
	resp, b := e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, header: noAuth})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST with no body and no bearer = %d %s, want 200", resp.StatusCode, b)
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil || res["watch_id"] != "w1" || res["state"] != "fired" || len(res) != 3 {
		t.Fatalf("answer = %s, want only watch_id, state and sentence", b)
	}
	if got := e.fake.calls.completed; got.Token != completionToken || got.Status != "success" {
		t.Fatalf("the service got %+v", got)
	}
	resp, b = e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, body: `{"status":"failure","data":{"reason":"red"}}`, header: noAuth})
	if got := e.fake.calls.completed; resp.StatusCode != 200 || got.Status != "failure" || string(got.Data) != `{"reason":"red"}` {
		t.Fatalf("POST failure = %d %s; service got %+v", resp.StatusCode, b, got)
	}
	// status is optional in a body too (docs/api.md): data alone succeeds.
	for _, body := range []string{`{"data":{"rows":3}}`, `{}`} {
		resp, b = e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, body: body, header: noAuth})
		if got := e.fake.calls.completed; resp.StatusCode != 200 || got.Status != "success" {
			t.Fatalf("POST %s = %d %s; service got %+v, want success", body, resp.StatusCode, b, got)
		}
	}
	resp, b = e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, body: `{"status":"success","extra":1}`, header: noAuth})
	if resp.StatusCode != 422 {
		t.Fatalf("an unknown field = %d %s, want 422", resp.StatusCode, b)
	}
	for _, c := range []struct {
		err  error
		want int
	}{{vigil.Errorf(vigil.CodeConflict, "this completion token was already used"), 409}, {vigil.Errorf(vigil.CodeNotFound, "no such completion token"), 404}} {
		e.fake.set(func(f *fake) { f.err = c.err })
		resp, b := e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, header: noAuth})
		if resp.StatusCode != c.want {
			t.Errorf("%v: status %d %s, want %d", c.err, resp.StatusCode, b, c.want)
		}
	}
	e.fake.set(func(f *fake) { f.err = errors.New("disk full") })
	e.do(t, request{method: "POST", path: "/v1/complete/" + completionToken, header: noAuth})
	if out := logs.String(); strings.Contains(out, "c2VjcmV0") || !strings.Contains(out, "/v1/complete/{token}") {
		t.Fatalf("the log holds the completion token, or no completion line:\n%s", out)
	}
}

func TestClientComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := e.c.Complete(t.Context(), vigil.CompleteRequest{Token: completionToken, Status: "success"})
	if err != nil || w.ID != "w1" || w.State != vigil.StateFired || w.Outcome == nil || w.Outcome.Sentence == "" {
		t.Fatalf("Complete = %+v, %v", w, err)
	}
	e.fake.set(func(f *fake) { f.err = vigil.Errorf(vigil.CodeConflict, "already used") })
	if _, err := e.c.Complete(t.Context(), vigil.CompleteRequest{Token: completionToken, Status: "success"}); !errors.Is(err, vigil.ErrConflict) {
		t.Fatalf("Complete of a used token = %v, want ErrConflict across the wire", err)
	}
}
