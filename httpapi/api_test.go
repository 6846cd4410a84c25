package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/httpapi"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const adminToken = "adm-7f3c9e1b5a2d4f6081c3e5a7b9d1f3e5"

// env is a server over a fake service, and a client of it.
type env struct {
	fake *fake
	api  *httpapi.Server
	ts   *httptest.Server
	c    *client.Client
}

func newEnv(t *testing.T, opts ...func(*httpapi.Options)) *env {
	t.Helper()
	f := newFake()
	o := httpapi.Options{Service: f, AdminToken: adminToken}
	for _, fn := range opts {
		fn(&o)
	}
	api := httpapi.New(o)
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		api.Close()
		ts.Close()
	})
	c, err := client.New(ts.URL, adminToken, &client.Options{HTTPClient: ts.Client()})
	if err != nil {
		t.Fatalf("client.New(%q) = %v", ts.URL, err)
	}
	return &env{fake: f, api: api, ts: ts, c: c}
}

// request describes a raw HTTP request for env.do.
type request struct {
	method, path, body string
	// header holds extra headers; Content-Type defaults to JSON when
	// there is a body, and Authorization to the admin token.
	header map[string]string
}

// do sends r and returns the response with its body read.
func (e *env) do(t *testing.T, r request) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, e.ts.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	for k, v := range r.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// apiError is the error shape as decoded by a test.
type apiError struct {
	Code    vigil.Code `json:"code"`
	Message string     `json:"message"`
	Field   string     `json:"field"`
}

func decodeError(t *testing.T, b []byte) apiError {
	t.Helper()
	var body struct {
		Error *apiError `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil {
		t.Fatalf("error body %q does not have the error shape: %v", b, err)
	}
	return *body.Error
}

func TestRegister(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		existing, replayed bool
		req                vigil.RegisterRequest
		wantStatus         int
		wantReplayHeader   string
	}{
		{name: "created", req: vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "agent-7", Note: "n"}, wantStatus: http.StatusCreated},
		{name: "existing", existing: true, req: vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "agent-7"}, wantStatus: http.StatusOK},
		{name: "replayed", replayed: true, req: vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "agent-7", IdempotencyKey: "turn-18-call-3"},
			wantStatus: http.StatusOK, wantReplayHeader: "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.fake.set(func(f *fake) { f.existing, f.replayed = tt.existing, tt.replayed })

			body, _ := json.Marshal(tt.req)
			resp, b := e.do(t, request{method: "POST", path: "/v1/watches", body: string(body)})
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("POST /v1/watches status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, b)
			}
			if got := resp.Header.Get("Idempotent-Replayed"); got != tt.wantReplayHeader {
				t.Errorf("Idempotent-Replayed = %q, want %q", got, tt.wantReplayHeader)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}

			w, err := e.c.Register(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Register() = %v", err)
			}
			if w.Replayed != tt.replayed || w.Existing != tt.existing {
				t.Errorf("Register() replayed, existing = %v, %v, want %v, %v", w.Replayed, w.Existing, tt.replayed, tt.existing)
			}
			if w.Kind != tt.req.Kind || w.Recipient != tt.req.Recipient {
				t.Errorf("Register() = %s for %s, want %s for %s", w.Kind, w.Recipient, tt.req.Kind, tt.req.Recipient)
			}
		})
	}
}

func TestRegisterHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "agent-7", IdempotencyKey: "k-1", ChainDepth: 2,
		Predicate: json.RawMessage(`{"url":"https://example.com/health"}`)}
	if _, err := e.c.Register(context.Background(), req); err != nil {
		t.Fatalf("Register() = %v", err)
	}
	// The header alone sets the key; ?observe=true sets Observe.
	resp, b := e.do(t, request{method: "POST", path: "/v1/watches?observe=true", body: `{"kind":"timer","recipient":"r","predicate":{"in":"1m"}}`,
		header: map[string]string{"Idempotency-Key": "k-2", "Vigil-Chain-Depth": "1"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST status = %d, want 201 (%s)", resp.StatusCode, b)
	}
	if got, want := resp.Header.Get("Location"), "/v1/watches/01JDZK4V7Q3M2N8P5R6S7T8V9W"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	got := e.fake.snapshot().registered
	want := []vigil.RegisterRequest{
		req,
		{Kind: vigil.KindTimer, Recipient: "r", Predicate: json.RawMessage(`{"in":"1m"}`), IdempotencyKey: "k-2", ChainDepth: 1, Observe: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the service got (-want +got):\n%s", diff)
	}
}

func TestWatchRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	w, err := e.c.Watch(ctx, "w1")
	if err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	// Times cross the wire with milliseconds in UTC; NextDue only while pending.
	if diff := cmp.Diff(testWatch("w1"), w); diff != "" {
		t.Errorf("Watch() (-want +got):\n%s", diff)
	}

	page, err := e.c.Watches(ctx, vigil.ListRequest{Recipient: "agent-7", State: vigil.StatePending, Kind: vigil.KindCI,
		Labels: map[string]string{"task": "T-19", "team": "a=b"}, Text: "Deploy 100%", After: "w0", Limit: 2})
	if err != nil {
		t.Fatalf("Watches() = %v", err)
	}
	if len(page.Watches) != 2 || page.Next != "w2" {
		t.Errorf("Watches() = %d watches, next %q; want 2, \"w2\"", len(page.Watches), page.Next)
	}
	wantList := vigil.ListRequest{Recipient: "agent-7", State: vigil.StatePending, Kind: vigil.KindCI,
		Labels: map[string]string{"task": "T-19", "team": "a=b"}, Text: "Deploy 100%", After: "w0", Limit: 2}
	if diff := cmp.Diff(wantList, e.fake.snapshot().list); diff != "" {
		t.Errorf("the service's ListRequest (-want +got):\n%s", diff)
	}

	why, err := e.c.Why(ctx, "w1")
	if err != nil || why.Sentence != "1 check is still running." || why.Watch.ID != "w1" {
		t.Errorf("Why() = %+v, %v; want the sentence about w1", why, err)
	}

	w, err = e.c.Wait(ctx, "w1", 20*time.Second)
	if err != nil || w.State != vigil.StateFired || w.Outcome == nil {
		t.Errorf("Wait() = %+v, %v; want a fired watch", w, err)
	}
	if got := e.fake.snapshot().waited; got != 20*time.Second {
		t.Errorf("the service waited %v, want 20s", got)
	}

	w, err = e.c.Check(ctx, "w2")
	if err != nil || w.ID != "w2" || w.Polls != 1 || e.fake.snapshot().checked != "w2" {
		t.Errorf("Check() = %+v, %v; want w2 probed once", w, err)
	}

	w, err = e.c.Cancel(ctx, "w1")
	if err != nil || w.State != vigil.StateCancelled || e.fake.snapshot().cancelled != "w1" {
		t.Errorf("Cancel() = %+v, %v; want w1 cancelled", w, err)
	}

	resp, b := e.do(t, request{method: "DELETE", path: "/v1/watches/w3"})
	if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
		t.Errorf("DELETE status = %d, body %q; want 204 and no body", resp.StatusCode, b)
	}
	if err := e.c.Delete(ctx, "w4"); err != nil || e.fake.snapshot().deleted != "w4" {
		t.Errorf("Delete() = %v (service deleted %q), want nil for w4", err, e.fake.snapshot().deleted)
	}

	_, err = e.c.Watch(ctx, "missing")
	if !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("Watch(missing) = %v, want not_found", err)
	}
}

func TestRecipientRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	after := int64(3)
	page, err := e.c.Messages(ctx, vigil.MessagesRequest{Recipient: "agent-7", Reader: "hook", After: &after, Wait: 2 * time.Second, Ack: true, Limit: 10})
	if err != nil {
		t.Fatalf("Messages() = %v", err)
	}
	wantPage := vigil.MessagesPage{Cursor: 4, Messages: []*vigil.Message{{Seq: 5, ID: "m5", Recipient: "agent-7", WatchID: "w1",
		Type: vigil.MessageFired, Text: "CI passed on acme/api at 3f2a9c0.", CreatedAt: time.Date(2025, 11, 30, 12, 5, 0, 0, time.UTC)}}}
	if diff := cmp.Diff(wantPage, page); diff != "" {
		t.Errorf("Messages() (-want +got):\n%s", diff)
	}
	wantReq := vigil.MessagesRequest{Recipient: "agent-7", Reader: "hook", After: &after, Wait: 2 * time.Second, Ack: true, Limit: 10}
	if diff := cmp.Diff(wantReq, e.fake.snapshot().messages); diff != "" {
		t.Errorf("the service's MessagesRequest (-want +got):\n%s", diff)
	}

	if err := e.c.Ack(ctx, vigil.AckRequest{Recipient: "agent-7", Reader: "hook", Seq: 5}); err != nil {
		t.Fatalf("Ack() = %v", err)
	}
	if diff := cmp.Diff(vigil.AckRequest{Recipient: "agent-7", Reader: "hook", Seq: 5}, e.fake.snapshot().acked); diff != "" {
		t.Errorf("the service's AckRequest (-want +got):\n%s", diff)
	}

	res, err := e.c.CloseRecipient(ctx, "agent-7")
	if err != nil || res.Cancelled != 2 || e.fake.snapshot().closed != "agent-7" {
		t.Errorf("CloseRecipient() = %+v, %v; want 2 cancelled for agent-7", res, err)
	}

	m, err := e.c.Note(ctx, vigil.NoteRequest{Recipient: "agent-7", Title: "findings", Body: "all green"})
	if err != nil || m.Seq != 9 || m.Type != vigil.MessageNote || m.Text != "findings" {
		t.Errorf("Note() = %+v, %v; want the note as seq 9", m, err)
	}
	if diff := cmp.Diff(vigil.NoteRequest{Recipient: "agent-7", Title: "findings", Body: "all green"}, e.fake.snapshot().noted); diff != "" {
		t.Errorf("the service's NoteRequest (-want +got):\n%s", diff)
	}
}

// TestErrorCodes drives every code through the one table and back.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	for _, code := range httpapi.Codes() {
		t.Run(string(code), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.fake.set(func(f *fake) {
				f.err = &vigil.Error{Code: code, Message: "the " + string(code) + " sentence", Field: "predicate.url"}
			})

			resp, b := e.do(t, request{method: "GET", path: "/v1/watches/w1"})
			if resp.StatusCode != httpapi.StatusOf(code) {
				t.Errorf("status = %d, want StatusOf(%s) = %d", resp.StatusCode, code, httpapi.StatusOf(code))
			}
			want := apiError{Code: code, Message: "the " + string(code) + " sentence", Field: "predicate.url"}
			if code == vigil.CodeInternal {
				want = apiError{Code: code, Message: "internal error"}
			}
			if diff := cmp.Diff(want, decodeError(t, b)); diff != "" {
				t.Errorf("error body (-want +got):\n%s", diff)
			}

			_, err := e.c.Watch(context.Background(), "w1")
			if !errors.Is(err, &vigil.Error{Code: code}) {
				t.Errorf("client Watch() = %v, want an error with code %s", err, code)
			}
			var ve *vigil.Error
			if !errors.As(err, &ve) || ve.Message != want.Message || ve.Field != want.Field {
				t.Errorf("client Watch() = %#v, want message %q field %q", err, want.Message, want.Field)
			}
		})
	}
}

func TestInternalErrors(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"plain error":  errors.New("database is locked: /var/lib/vigil/vigil.db"),
		"unknown code": &vigil.Error{Code: "brand_new", Message: "something only a newer build knows"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			e := newEnv(t, func(o *httpapi.Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
			e.fake.set(func(f *fake) { f.err = err })
			resp, b := e.do(t, request{method: "GET", path: "/v1/watches"})
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("status = %d, want 500", resp.StatusCode)
			}
			if diff := cmp.Diff(apiError{Code: vigil.CodeInternal, Message: "internal error"}, decodeError(t, b)); diff != "" {
				t.Errorf("error body (-want +got):\n%s", diff)
			}
			id := resp.Header.Get("X-Request-Id")
			if n := strings.Count(logs.String(), `"msg":"internal error"`); n != 1 {
				t.Errorf("internal error logged %d times, want once:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), id) || !strings.Contains(logs.String(), err.Error()) {
				t.Errorf("log lacks the request id %q or the cause:\n%s", id, logs.String())
			}
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	scoped := vigil.Scope{Recipients: []string{"agent-7"}, TokenID: "tok_1"}
	authenticate := func(ctx context.Context, token string) (vigil.Scope, bool, error) {
		switch token {
		case "scoped-token-123":
			return scoped, true, nil
		case "store-down":
			return vigil.Scope{}, false, vigil.Errorf(vigil.CodeUnavailable, "the token store is not open yet")
		}
		return vigil.Scope{}, false, nil
	}
	e := newEnv(t, func(o *httpapi.Options) { o.AuthenticateFunc = authenticate })

	var bodies []string
	for _, auth := range []string{"", "Bearer", "Bearer wrong-token-456", "Basic " + adminToken, "Bearer " + adminToken + "x"} {
		resp, b := e.do(t, request{method: "GET", path: "/v1/watches/w1", header: map[string]string{"Authorization": auth}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status = %d, want 401", auth, resp.StatusCode)
		}
		if got := decodeError(t, b).Code; got != vigil.CodeUnauthorized {
			t.Errorf("Authorization %q: code = %s, want unauthorized", auth, got)
		}
		if strings.Contains(string(b), adminToken) || strings.Contains(string(b), "wrong-token") || strings.Contains(string(b), "scoped-token") {
			t.Errorf("Authorization %q: the 401 body reveals a token: %s", auth, b)
		}
		bodies = append(bodies, string(b))
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("401 bodies differ, revealing why: %q vs %q", bodies[0], b)
		}
	}

	// The wrong token through the client.
	bad, err := client.New(e.ts.URL, "wrong-token-456", &client.Options{HTTPClient: e.ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Watch(context.Background(), "w1")
	if !errors.Is(err, vigil.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-token-456") {
		t.Errorf("Watch() with a wrong token = %v, want unauthorized without the token", err)
	}

	// A scoped token acts within its scope; the admin has none.
	sc, err := client.New(e.ts.URL, "scoped-token-123", &client.Options{HTTPClient: e.ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Watch(context.Background(), "w1"); err != nil {
		t.Fatalf("Watch() with a scoped token = %v", err)
	}
	if diff := cmp.Diff(&scoped, e.fake.snapshot().scope); diff != "" {
		t.Errorf("scope in the service's context (-want +got):\n%s", diff)
	}
	if _, err := e.c.Watch(context.Background(), "w1"); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.snapshot().scope; got != nil {
		t.Errorf("the admin's request carried scope %+v, want none", got)
	}

	// An authenticator that cannot tell is not a 401.
	resp, _ := e.do(t, request{method: "GET", path: "/v1/watches/w1", header: map[string]string{"Authorization": "Bearer store-down"}})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("authenticator unavailable: status = %d, want 503", resp.StatusCode)
	}

	// The public routes need no token.
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		resp, _ := e.do(t, request{method: "GET", path: path, header: map[string]string{"Authorization": ""}})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: status = %d, want 200", path, resp.StatusCode)
		}
	}
}

func TestNoTokenConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) { o.AdminToken = "" })
	resp, _ := e.do(t, request{method: "GET", path: "/v1/watches/w1", header: map[string]string{"Authorization": "Bearer "}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status = %d with no token configured, want 401", resp.StatusCode)
	}
}

func TestBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) { o.MaxBodyBytes = 256 })
	big := `{"kind":"timer","recipient":"r","note":"` + strings.Repeat("x", 300) + `"}`
	tests := []struct {
		name       string
		req        request
		wantStatus int
		want       apiError
	}{
		{"oversize", request{method: "POST", path: "/v1/watches", body: big}, 413,
			apiError{Code: vigil.CodePayloadTooLarge, Message: "the request body is larger than the limit of 256 bytes"}},
		{"wrong content type", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer"}`, header: map[string]string{"Content-Type": "text/plain"}}, 415,
			apiError{Code: vigil.CodeUnsupportedMedia, Message: "the request body must be JSON, sent with Content-Type: application/json"}},
		{"unknown field", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"r","deadlin":"1h"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: `unknown field "deadlin"`, Field: "deadlin"}},
		{"transport-only field", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","ChainDepth":0}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: `unknown field "ChainDepth"`, Field: "ChainDepth"}},
		{"wrong type", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","max_polls":"many"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: `field "max_polls" must be a number, not string`, Field: "max_polls"}},
		{"trailing data", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer"} {"kind":"http"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: "the request body holds more than one JSON value"}},
		{"not json", request{method: "POST", path: "/v1/watches", body: `{"kind":`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: "the request body ends in the middle of a JSON value"}},
		{"not an object", request{method: "POST", path: "/v1/watches", body: `[1]`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: "the request body must be a JSON object, not array"}},
		{"empty", request{method: "POST", path: "/v1/watches", header: map[string]string{"Content-Type": "application/json"}}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Message: "the request body is empty; send a JSON object"}},
		{"key mismatch", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","idempotency_key":"a"}`, header: map[string]string{"Idempotency-Key": "b"}}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "idempotency_key",
				Message: "the Idempotency-Key header and the body's idempotency_key differ; send one, or the same in both"}},
		{"bad chain depth", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer"}`, header: map[string]string{"Vigil-Chain-Depth": "-1"}}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "Vigil-Chain-Depth", Message: `the Vigil-Chain-Depth header must be a non-negative whole number, not "-1"`}},
		{"ack without seq", request{method: "POST", path: "/v1/recipients/agent-7/ack", body: `{"reader":"hook"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "seq", Message: "seq must be a non-negative whole number: the last message seq read"}},
		{"note with recipient", request{method: "POST", path: "/v1/recipients/agent-7/notes", body: `{"title":"t","recipient":"x"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "recipient", Message: `unknown field "recipient"`}},
		{"ack with recipient", request{method: "POST", path: "/v1/recipients/agent-7/ack", body: `{"reader":"hook","seq":1,"recipient":"x"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "recipient", Message: `unknown field "recipient"`}},
		{"duplicate key", request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"r","kind":"http"}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "kind", Message: `key "kind" is given twice; give each key once`}},
		{"duplicate nested key", request{method: "POST", path: "/v1/watches", body: `{"kind":"http","recipient":"r","predicate":{"url":"http://a.example","headers":{"A":"1"},"url":"http://b.example"}}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "predicate.url", Message: `key "predicate.url" is given twice; give each key once`}},
		{"duplicate key in an array", request{method: "POST", path: "/v1/watches", body: `{"kind":"http","recipient":"r","predicate":{"x":[1,{"a":1,"b":{"a":2},"a":3}]}}`}, 422,
			apiError{Code: vigil.CodeInvalidRequest, Field: "predicate.x[1].a", Message: `key "predicate.x[1].a" is given twice; give each key once`}},
		{"the same key in sibling objects is fine", request{method: "POST", path: "/v1/watches", body: `{"kind":"http","recipient":"r","predicate":{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}}`}, 201, apiError{}},
		{"charset parameter is fine", request{method: "POST", path: "/v1/recipients/agent-7/ack", body: `{"reader":"hook","seq":1}`,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, 204, apiError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, b := e.do(t, tt.req)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, b)
			}
			if tt.wantStatus < 300 {
				return
			}
			if diff := cmp.Diff(tt.want, decodeError(t, b)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOversizeChunked sends a body with no Content-Length.
func TestOversizeChunked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) { o.MaxBodyBytes = 64 })
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprintf(pw, `{"kind":"timer","recipient":"r","note":"%s"}`, strings.Repeat("y", 200))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", e.ts.URL+"/v1/watches", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || decodeError(t, b).Code != vigil.CodePayloadTooLarge {
		t.Errorf("chunked oversize body: status %d, body %s; want 413 payload_too_large", resp.StatusCode, b)
	}
}

func TestQueryRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		path       string
		wantStatus int
		wantCode   vigil.Code
		wantField  string
	}{
		{"/v1/recipients/agent-7/messages?after=abc", 422, vigil.CodeInvalidRequest, "after"},
		{"/v1/recipients/agent-7/messages?after=-1", 422, vigil.CodeInvalidRequest, "after"},
		{"/v1/recipients/agent-7/messages?wait=soon", 422, vigil.CodeInvalidRequest, "wait"},
		{"/v1/recipients/agent-7/messages?ack=yes%3F", 422, vigil.CodeInvalidRequest, "ack"},
		{"/v1/recipients/agent-7/messages?ack=true", 422, vigil.CodeInvalidRequest, "reader"},
		{"/v1/recipients/agent-7/messages?reader=a%20b", 422, vigil.CodeInvalidRequest, "reader"},
		{"/v1/recipients/agent%207/messages", 422, vigil.CodeInvalidRequest, "recipient"},
		{"/v1/recipients/agent-7/messages?limit=0", 422, vigil.CodeInvalidRequest, "limit"},
		{"/v1/watches?recipient=agent%2F7", 422, vigil.CodeInvalidRequest, "recipient"},
		{"/v1/watches?recipient=", 422, vigil.CodeInvalidRequest, "recipient"},
		{"/v1/watches?state=done", 422, vigil.CodeInvalidRequest, "state"},
		{"/v1/watches?kind=githubci", 422, vigil.CodeUnknownKind, "kind"},
		{"/v1/watches?limit=ten", 422, vigil.CodeInvalidRequest, "limit"},
		{"/v1/watches?limit=1001", 422, vigil.CodeInvalidRequest, "limit"},
		{"/v1/watches?label=task", 422, vigil.CodeInvalidRequest, "label"},
		{"/v1/watches?label=a=1&label=a=2", 422, vigil.CodeInvalidRequest, "label"},
		{"/v1/watches?recipent=agent-7", 422, vigil.CodeInvalidRequest, "recipent"},
		{"/v1/watches?state=pending&state=fired", 422, vigil.CodeInvalidRequest, "state"},
		{"/v1/watches?after=%zz", 422, vigil.CodeInvalidRequest, ""},
		{"/v1/watches/w1/wait?timeout=forever", 422, vigil.CodeInvalidRequest, "timeout"},
		{"/v1/watches/w1/wait?timeout=-5s", 422, vigil.CodeInvalidRequest, "timeout"},
		{"/v1/events?watch=a%20b", 422, vigil.CodeInvalidRequest, "watch"},
		{"/v1/watches/a%20b", 404, vigil.CodeNotFound, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			resp, b := e.do(t, request{method: "GET", path: tt.path})
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("GET %s status = %d, want %d (body %s)", tt.path, resp.StatusCode, tt.wantStatus, b)
			}
			got := decodeError(t, b)
			if got.Code != tt.wantCode || got.Field != tt.wantField {
				t.Errorf("GET %s = %+v, want code %s naming %q", tt.path, got, tt.wantCode, tt.wantField)
			}
		})
	}
}

func TestWaitClamped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		path, header string
		want         func(calls) time.Duration
		wantWait     time.Duration
	}{
		{"/v1/recipients/agent-7/messages?wait=5m", "60s", func(c calls) time.Duration { return c.messages.Wait }, time.Minute},
		{"/v1/recipients/agent-7/messages?wait=30s", "", func(c calls) time.Duration { return c.messages.Wait }, 30 * time.Second},
		{"/v1/watches/w1/wait?timeout=5m", "60s", func(c calls) time.Duration { return c.waited }, time.Minute},
		{"/v1/watches/w1/wait?timeout=7d", "60s", func(c calls) time.Duration { return c.waited }, time.Minute},
		{"/v1/watches/w1/wait?timeout=2s", "", func(c calls) time.Duration { return c.waited }, 2 * time.Second},
		{"/v1/watches/w1/wait", "", func(c calls) time.Duration { return c.waited }, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, b := e.do(t, request{method: "GET", path: tt.path})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s status = %d (%s)", tt.path, resp.StatusCode, b)
			}
			if got := resp.Header.Get("Vigil-Wait-Clamped"); got != tt.header {
				t.Errorf("GET %s Vigil-Wait-Clamped = %q, want %q", tt.path, got, tt.header)
			}
			if got := tt.want(e.fake.snapshot()); got != tt.wantWait {
				t.Errorf("GET %s: the service waited %v, want %v", tt.path, got, tt.wantWait)
			}
		})
	}
}

func TestNoRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, r := range []request{
		{method: "GET", path: "/v1/nothing"},
		{method: "GET", path: "/v1/watches/w1/nothing"},
	} {
		resp, b := e.do(t, r)
		if resp.StatusCode != http.StatusNotFound || decodeError(t, b).Code != vigil.CodeNotFound {
			t.Errorf("%s %s = %d %s, want 404 not_found", r.method, r.path, resp.StatusCode, b)
		}
	}
}

// TestWrongMethod asks known paths with methods they do not serve: 405
// method_not_allowed with an Allow header naming those they do.
func TestWrongMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		req   request
		allow string
	}{
		{request{method: "PUT", path: "/v1/watches", body: `{}`}, "GET, HEAD, POST"},
		{request{method: "PUT", path: "/v1/watches/w1"}, "DELETE, GET, HEAD"},
		{request{method: "GET", path: "/v1/watches/w1/cancel"}, "POST"},
		{request{method: "DELETE", path: "/healthz"}, "GET, HEAD"},
	} {
		resp, b := e.do(t, tt.req)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s = %d %s, want 405", tt.req.method, tt.req.path, resp.StatusCode, b)
			continue
		}
		if got := resp.Header.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tt.req.method, tt.req.path, got, tt.allow)
		}
		want := apiError{Code: vigil.CodeMethodNotAllowed,
			Message: fmt.Sprintf("%s is not served at %s; it answers %s", tt.req.method, tt.req.path, tt.allow)}
		if diff := cmp.Diff(want, decodeError(t, b)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.req.method, tt.req.path, diff)
		}
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	ready := errors.New("store is migrating")
	e := newEnv(t, func(o *httpapi.Options) { o.ReadyFunc = func(context.Context) error { return ready } })
	resp, b := e.do(t, request{method: "GET", path: "/healthz"})
	if resp.StatusCode != 200 || string(b) != "{\"status\":\"ok\"}\n" {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, b)
	}
	resp, b = e.do(t, request{method: "GET", path: "/readyz"})
	if resp.StatusCode != 503 {
		t.Errorf("GET /readyz = %d, want 503", resp.StatusCode)
	}
	if diff := cmp.Diff(apiError{Code: vigil.CodeUnavailable, Message: "not ready"}, decodeError(t, b)); diff != "" {
		t.Errorf("GET /readyz (-want +got):\n%s", diff)
	}
	resp, b = e.do(t, request{method: "GET", path: "/openapi.json"})
	if resp.StatusCode != 200 || !bytes.Equal(b, httpapi.OpenAPI()) {
		t.Errorf("GET /openapi.json = %d, not the embedded document", resp.StatusCode)
	}
}

func TestMount(t *testing.T) {
	t.Parallel()
	f := newFake()
	api := httpapi.New(httpapi.Options{Service: f, AdminToken: adminToken,
		AuthenticateFunc: func(ctx context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"r1"}}, token == "scoped", nil
		}})
	api.Mount("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := vigil.ScopeFrom(r.Context())
		_, flusher := w.(http.Flusher) // streaming handlers assert it
		fmt.Fprintf(w, "mcp %v %v flusher=%v", s.Recipients, ok, flusher)
	}))
	api.MountPublic("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "metrics") }))
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	e := &env{fake: f, api: api, ts: ts}
	tests := []struct {
		path, auth string
		wantStatus int
		wantBody   string
	}{
		{"/mcp", "", 401, ""},
		{"/mcp", "Bearer scoped", 200, "mcp [r1] true flusher=true"},
		{"/mcp", "Bearer " + adminToken, 200, "mcp [] false flusher=true"},
		{"/metrics", "", 200, "metrics"},
	}
	for _, tt := range tests {
		resp, b := e.do(t, request{method: "GET", path: tt.path, header: map[string]string{"Authorization": tt.auth}})
		if resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && string(b) != tt.wantBody) {
			t.Errorf("GET %s (%q) = %d %q, want %d %q", tt.path, tt.auth, resp.StatusCode, b, tt.wantStatus, tt.wantBody)
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.c.Subscribe(ctx, vigil.EventFilter{Recipient: "agent-7"})
	if err != nil {
		t.Fatalf("Subscribe() = %v", err)
	}
	if diff := cmp.Diff(vigil.EventFilter{Recipient: "agent-7"}, e.fake.snapshot().filter); diff != "" {
		t.Errorf("the service's filter (-want +got):\n%s", diff)
	}
	want := []vigil.Event{
		{Type: vigil.EventWatchProgress, WatchID: "w1", Recipient: "agent-7", State: vigil.StatePending, Polls: 4, Text: "2 of 3 checks done\nline two"},
		{Type: vigil.EventWatchSettled, WatchID: "w1", Recipient: "agent-7", State: vigil.StateFired, Done: true},
	}
	e.fake.publish(vigil.Event{Type: vigil.EventWatchCreated, WatchID: "w9", Recipient: "someone-else"})
	for _, ev := range want {
		e.fake.publish(ev)
	}
	for i, w := range want {
		select {
		case got := <-ch:
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("event %d (-want +got):\n%s", i, diff)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
	cancel()
	for range ch {
	}
	// The handler returns once the client is gone, ending the subscription.
	deadline := time.Now().Add(10 * time.Second)
	for e.fake.subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription outlived the client")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A refused subscription is an error from Subscribe itself.
	e.fake.set(func(f *fake) { f.err = vigil.Errorf(vigil.CodeNotFound, "no recipient %q", "x") })
	if _, err := e.c.Subscribe(context.Background(), vigil.EventFilter{Recipient: "x"}); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("Subscribe() refused = %v, want not_found", err)
	}
}

// TestEventFraming reads the raw stream: the retry delay first, then each
// event with its type and data; a message event carries its mailbox seq as
// its id, the others (not durable) none; heartbeats are comments.
func TestEventFraming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) { o.Heartbeat = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/events?watch=w1", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	e.fake.publish(vigil.Event{Type: vigil.EventWatchSettled, WatchID: "w1", State: vigil.StateFired, Done: true})
	e.fake.publish(vigil.Event{Type: vigil.EventMessage, WatchID: "w1", State: vigil.StateFired, Text: "fired", Seq: 41})
	e.fake.publish(vigil.Event{Type: vigil.EventWatchObserved, WatchID: "w1"})
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), "event: watch.observed\n") || !strings.Contains(got.String(), ": heartbeat\n\n") {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("stream ended early: %v; read %q", err, got.String())
		}
	}
	if !strings.HasPrefix(got.String(), "retry: 2000\n") {
		t.Errorf("stream %q does not begin with the retry delay", got.String())
	}
	for _, want := range []string{
		"\n\nevent: watch.settled\ndata: {\"type\":\"watch.settled\",\"watch_id\":\"w1\",\"state\":\"fired\",\"done\":true}\n\n",
		"\n\nevent: message.created\nid: 41\ndata: {\"type\":\"message.created\",\"watch_id\":\"w1\",\"state\":\"fired\",\"text\":\"fired\",\"seq\":41}\n\n",
		"\n\nevent: watch.observed\ndata: {\"type\":\"watch.observed\",\"watch_id\":\"w1\"}\n\n",
	} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("stream %q lacks %q", got.String(), want)
		}
	}
}

// TestEventsResume: Last-Event-ID resumes the stream after that mailbox
// seq; one that is not a seq is refused; the Go client sends it.
func TestEventsResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	open := func(lastID string) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/events?recipient=agent-7", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		return resp, nil
	}
	if resp, b := open("41"); resp.StatusCode != http.StatusOK {
		t.Fatalf("Last-Event-ID 41 = %d %s", resp.StatusCode, b)
	}
	if f := e.fake.snapshot().filter; f.After == nil || *f.After != 41 || f.Recipient != "agent-7" {
		t.Errorf("the service's filter = %+v, want recipient agent-7 after 41", f)
	}
	for _, bad := range []string{"x", "-1", "1.5", "99999999999999999999"} {
		resp, b := open(bad)
		if resp.StatusCode != 422 || decodeError(t, b).Field != "Last-Event-ID" {
			t.Errorf("Last-Event-ID %q = %d %s, want 422 naming Last-Event-ID", bad, resp.StatusCode, b)
		}
	}
	after := int64(7)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := e.c.Subscribe(ctx, vigil.EventFilter{Recipient: "agent-7", After: &after}); err != nil {
		t.Fatal(err)
	}
	if f := e.fake.snapshot().filter; f.After == nil || *f.After != 7 {
		t.Errorf("the service's filter through the client = %+v, want after 7", f)
	}
}

// TestLogsHoldNoSecrets runs requests carrying tokens, including refused
// and failing ones, through a server logging at debug level.
func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	const scopedToken = "vgl_scoped_5e1d2c3b4a5f6e7d"
	const wrongToken = "vgl_wrong_9a8b7c6d5e4f3a2b"
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, func(o *httpapi.Options) {
		o.Logger = logger
		o.AuthenticateFunc = func(ctx context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"agent-7"}}, token == scopedToken, nil
		}
	})
	for _, token := range []string{adminToken, scopedToken, wrongToken} {
		for _, r := range []request{
			{method: "GET", path: "/v1/watches?recipient=agent-7"},
			{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"agent-7","deliver":{"webhook":{"url":"https://u:pw@example.com","secret":"whsec_abc"}}}`},
			{method: "GET", path: "/v1/nowhere"},
		} {
			r.header = map[string]string{"Authorization": "Bearer " + token}
			e.do(t, r)
		}
	}
	e.fake.set(func(f *fake) { f.err = errors.New("disk full") })
	e.do(t, request{method: "GET", path: "/v1/watches/w1", header: map[string]string{"Authorization": "Bearer " + scopedToken}})

	out := logs.String()
	if !strings.Contains(out, "internal error") || !strings.Contains(out, "msg=request") {
		t.Fatalf("the log lacks the request lines or the internal error; is it logging?\n%s", out)
	}
	for _, secret := range []string{adminToken, scopedToken, wrongToken, "whsec_abc", "u:pw"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds the secret %q:\n%s", secret, out)
		}
	}
}

// TestGolden pins representative response bodies.
func TestGolden(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fake.set(func(f *fake) {})
	tests := []struct {
		name string
		req  request
		err  error
	}{
		{name: "watch", req: request{method: "GET", path: "/v1/watches/01JDZK4V7Q3M2N8P5R6S7T8V9W"}},
		{name: "wait_fired", req: request{method: "GET", path: "/v1/watches/w1/wait?timeout=1s"}},
		{name: "messages", req: request{method: "GET", path: "/v1/recipients/agent-7/messages?reader=hook"}},
		{name: "error_not_found", req: request{method: "GET", path: "/v1/watches/missing"}},
		{name: "error_invalid_predicate", req: request{method: "POST", path: "/v1/watches", body: `{"kind":"http","recipient":"agent-7","predicate":{"url":"ftp://x"}}`},
			err: vigil.FieldErrorf(vigil.CodeInvalidPredicate, "predicate.url", "url must be http or https, not %q", "ftp")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fake.set(func(f *fake) { f.err = tt.err })
			_, b := e.do(t, tt.req)
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, b, "", "  "); err != nil {
				t.Fatalf("response %q is not JSON: %v", b, err)
			}
			golden(t, filepath.Join("testdata", tt.name+".json"), pretty.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update refreshes it):\n%s", path, diff)
	}
}

// TestEventsOpenWithTheirStart: a stream opened without Last-Event-ID
// starts after the newest message (LastSeqFunc) and sends that seq as the
// id of its opening, so that an EventSource that loses the stream before
// any message reconnects with it and misses none of the messages written
// in between; one resumed sends the seq it resumed after.
func TestEventsOpenWithTheirStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) {
		o.LastSeqFunc = func(context.Context) (int64, error) { return 12, nil }
	})
	open := func(lastID string) string {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/events?recipient=agent-7", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), "\n\n") {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				t.Fatalf("stream ended early: %v; read %q", err, got.String())
			}
		}
		return got.String()
	}
	if got, want := open(""), "retry: 2000\nid: 12\n: vigil event stream\n\n"; got != want {
		t.Errorf("a live stream opens with %q, want %q", got, want)
	}
	if f := e.fake.snapshot().filter; f.After == nil || *f.After != 12 {
		t.Errorf("the service's filter = %+v, want after 12, the newest message", f)
	}
	if got, want := open("5"), "retry: 2000\nid: 5\n: vigil event stream\n\n"; got != want {
		t.Errorf("a resumed stream opens with %q, want %q", got, want)
	}
	if f := e.fake.snapshot().filter; f.After == nil || *f.After != 5 {
		t.Errorf("the service's filter = %+v, want after 5", f)
	}
}
