package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

const token = "vgl_secret_1b2c3d4e5f60718293a4"

func TestParseAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr, wantBase, wantDisplay string
		wantErr                     string
	}{
		{addr: "127.0.0.1:7474", wantBase: "http://127.0.0.1:7474", wantDisplay: "127.0.0.1:7474"},
		{addr: ":7474", wantBase: "http://127.0.0.1:7474", wantDisplay: "127.0.0.1:7474"},
		{addr: "[::1]:7474", wantBase: "http://[::1]:7474", wantDisplay: "[::1]:7474"},
		{addr: " localhost:80 ", wantBase: "http://localhost:80", wantDisplay: "localhost:80"},
		{addr: "http://127.0.0.1:7474", wantBase: "http://127.0.0.1:7474", wantDisplay: "http://127.0.0.1:7474"},
		{addr: "https://vigil.example.com/", wantBase: "https://vigil.example.com", wantDisplay: "https://vigil.example.com"},
		{addr: "https://example.com/vigil/", wantBase: "https://example.com/vigil", wantDisplay: "https://example.com/vigil"},
		{addr: "", wantErr: "no daemon address given"},
		{addr: "localhost", wantErr: "neither host:port nor an http:// URL"},
		{addr: "localhost:http", wantErr: "has no valid port"},
		{addr: "ftp://example.com", wantErr: "must use http:// or https://"},
		{addr: "http://user:hunter2@example.com", wantErr: "must not hold credentials"},
		// Not a URL: the refusal quotes the address, but not its
		// credentials.
		{addr: "http://user:hunter2@example.com:abc/x", wantErr: `"http://[redacted]@example.com:abc/x" is not a URL, and must not hold credentials`},
		{addr: "https://hunter2%zz@example.com/", wantErr: `"https://[redacted]@example.com/" is not a URL, and must not hold credentials`},
		{addr: "http://example.com:abc/", wantErr: `"http://example.com:abc/" is not a URL: invalid port`},
		{addr: "user:hunter2@example.com:7474", wantErr: `"[redacted]@example.com:7474" is neither host:port`},
		{addr: "http://", wantErr: "has no host"},
		{addr: "http://example.com/?x=1", wantErr: "must not have a query"},
	}
	for _, tt := range tests {
		base, display, err := parseAddr(tt.addr)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseAddr(%q) = %v, want an error saying %q", tt.addr, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("parseAddr(%q) error shows the password: %v", tt.addr, err)
			}
			continue
		}
		if err != nil || base != tt.wantBase || display != tt.wantDisplay {
			t.Errorf("parseAddr(%q) = %q, %q, %v; want %q, %q", tt.addr, base, display, err, tt.wantBase, tt.wantDisplay)
		}
	}
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"a b", "a\nb", "a\r\nX-Evil: 1"} {
		_, err := New("127.0.0.1:7474", tok, nil)
		if err == nil || strings.Contains(err.Error(), tok) {
			t.Errorf("New(token %q) = %v, want an error that does not show the token", tok, err)
		}
	}
	c, err := New("127.0.0.1:7474", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.hc == http.DefaultClient || c.hc.Transport == nil || c.hc.Transport == http.DefaultTransport {
		t.Error("New(nil options) uses the default client or transport")
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New(addr, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.Watch(context.Background(), "w1")
	if !errors.Is(err, &vigil.Error{Code: vigil.CodeUnavailable}) {
		t.Fatalf("Watch() = %v, want code unavailable", err)
	}
	if want := "vigil daemon not reachable at " + addr + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Watch() = %q, want it to start %q", err, want)
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("Watch() error shows the token: %v", err)
	}
	if _, err := c.Subscribe(context.Background(), vigil.EventFilter{}); !errors.Is(err, &vigil.Error{Code: vigil.CodeUnavailable}) {
		t.Errorf("Subscribe() = %v, want code unavailable", err)
	}
}

func TestTimeoutMessage(t *testing.T) {
	t.Parallel()
	c, err := New("127.0.0.1:7474", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.transportError(context.Background(), call{method: "GET", path: "/v1/watches"}, 70*time.Second, context.DeadlineExceeded)
	if got, want := err.Error(), "vigil daemon at 127.0.0.1:7474 did not answer within 1m10s"; got != want {
		t.Errorf("transportError() = %q, want %q", got, want)
	}
	if vigil.ErrorCode(err) != vigil.CodeUnavailable {
		t.Errorf("code = %s, want unavailable", vigil.ErrorCode(err))
	}
}

// TestErrorResponses maps answers that are and are not vigil's error shape.
func TestErrorResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        *vigil.Error
	}{
		{"vigil error", 404, "application/json", `{"error":{"code":"not_found","message":"no watch \"w1\"","field":"id"}}`,
			&vigil.Error{Code: vigil.CodeNotFound, Message: `no watch "w1"`, Field: "id"}},
		{"code unknown to this build", 418, "application/json", `{"error":{"code":"teapot","message":"short and stout"}}`,
			&vigil.Error{Code: "teapot", Message: "short and stout"}},
		{"echoed token", 400, "application/json", `{"error":{"code":"invalid_request","message":"bad token ` + token + `"}}`,
			&vigil.Error{Code: vigil.CodeInvalidRequest, Message: "bad token [redacted]"}},
		{"proxy 502", 502, "text/html", "<html>bad gateway " + token + "</html>", &vigil.Error{Code: vigil.CodeUnavailable}},
		{"plain 401", 401, "text/plain", "nope", &vigil.Error{Code: vigil.CodeUnauthorized}},
		{"plain 403", 403, "text/plain", "forbidden by a proxy", &vigil.Error{Code: vigil.CodeForbidden}},
		{"plain 404", 404, "text/plain", "404 page not found", &vigil.Error{Code: vigil.CodeNotFound}},
		{"plain 405", 405, "text/plain", "", &vigil.Error{Code: vigil.CodeMethodNotAllowed}},
		{"plain 429", 429, "text/plain", "slow down", &vigil.Error{Code: vigil.CodeRateLimited}},
		{"plain 503", 503, "text/plain", "", &vigil.Error{Code: vigil.CodeUnavailable}},
		{"plain 500", 500, "text/plain", "boom", &vigil.Error{Code: vigil.CodeInternal}},
		{"vigil 507", 507, "application/json", `{"error":{"code":"storage_full","message":"the disk is full"}}`,
			&vigil.Error{Code: vigil.CodeStorageFull, Message: "the disk is full"}},
		{"plain 507", 507, "text/plain", "", &vigil.Error{Code: vigil.CodeStorageFull}},
		{"plain 418", 418, "text/plain", "", &vigil.Error{Code: vigil.CodeInvalidRequest}},
		{"redirect", 302, "text/plain", "", &vigil.Error{Code: vigil.CodeInternal}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+token {
					t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
				}
				w.Header().Set("Content-Type", tt.contentType)
				if tt.status == 302 {
					w.Header().Set("Location", "http://elsewhere.example/")
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer ts.Close()
			c, err := New(ts.URL, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			_, err = c.Watch(context.Background(), "w1")
			var got *vigil.Error
			if !errors.As(err, &got) {
				t.Fatalf("Watch() = %v, want a *vigil.Error", err)
			}
			want := *tt.want
			if want.Message == "" {
				want.Message = fmt.Sprintf("vigil daemon at %s answered %d %s", ts.URL, tt.status, http.StatusText(tt.status))
			}
			if diff := cmp.Diff(want, *got); diff != "" {
				t.Errorf("Watch() error (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("Watch() error shows the token: %v", err)
			}
		})
	}
}

// TestRetryAfter holds that an error answered with Retry-After carries the
// wait (RetryAfter), in seconds or as a proxy's HTTP date, and keeps its
// code and message; an answer without the header, or with one that does
// not parse, carries none.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		status     int
		body       string
		header     string
		wantCode   vigil.Code
		wantWait   time.Duration // zero: about a minute and a half (the date)
		wantSaid   bool
		wantPhrase string
	}{
		{"rate limited", 429, `{"error":{"code":"rate_limited","message":"this token registers too fast; try again in 7 s"}}`, "7",
			vigil.CodeRateLimited, 7 * time.Second, true, "try again in 7 s"},
		{"starting", 503, `{"error":{"code":"unavailable","message":"vigil is starting; try again shortly"}}`, "1",
			vigil.CodeUnavailable, time.Second, true, "vigil is starting"},
		{"proxy date", 503, "", date, vigil.CodeUnavailable, 0, true, "answered 503"},
		{"past date", 503, "", "Mon, 02 Jan 2006 15:04:05 GMT", vigil.CodeUnavailable, 0, true, "answered 503"},
		{"bounded", 429, "", "99999999", vigil.CodeRateLimited, maxRetryAfter, true, "answered 429"},
		{"none", 503, `{"error":{"code":"unavailable","message":"vigil is shutting down; try again shortly"}}`, "",
			vigil.CodeUnavailable, 0, false, "shutting down"},
		{"garbage", 429, "", "soon", vigil.CodeRateLimited, 0, false, "answered 429"},
		{"negative", 429, "", "-3", vigil.CodeRateLimited, 0, false, "answered 429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer ts.Close()
			c, _ := New(ts.URL, token, &Options{HTTPClient: ts.Client()})
			_, err := c.Watch(context.Background(), "w1")
			if vigil.ErrorCode(err) != tt.wantCode || !strings.Contains(vigil.ErrorMessage(err), tt.wantPhrase) {
				t.Errorf("Watch() = %v (code %s), want code %s and a message saying %q", err, vigil.ErrorCode(err), tt.wantCode, tt.wantPhrase)
			}
			d, said := RetryAfter(err)
			switch {
			case said != tt.wantSaid:
				t.Errorf("RetryAfter() said %v, want %v (header %q)", said, tt.wantSaid, tt.header)
			case tt.name == "proxy date":
				if d < 80*time.Second || d > 90*time.Second {
					t.Errorf("RetryAfter() = %s for a date 90 s off, want about 90 s", d)
				}
			case d != tt.wantWait:
				t.Errorf("RetryAfter() = %s, want %s", d, tt.wantWait)
			}
		})
	}
	if _, said := RetryAfter(errors.New("plain")); said {
		t.Error("RetryAfter() of an error from no answer said a wait")
	}
}

func TestSubscribeRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantCode    vigil.Code
	}{
		{"unauthorized", 401, "application/json", `{"error":{"code":"unauthorized","message":"a valid bearer token is required"}}`, vigil.CodeUnauthorized},
		{"not a stream", 200, "application/json", `{}`, vigil.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer ts.Close()
			c, _ := New(ts.URL, token, &Options{HTTPClient: ts.Client()})
			ch, err := c.Subscribe(context.Background(), vigil.EventFilter{WatchID: "w1"})
			if ch != nil || vigil.ErrorCode(err) != tt.wantCode {
				t.Errorf("Subscribe() = %v, %v; want no channel and code %s", ch, err, tt.wantCode)
			}
		})
	}
}

func TestReadEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   []vigil.Event
	}{
		{"one", "event: watch.settled\nid: 1\ndata: {\"type\":\"watch.settled\",\"watch_id\":\"w1\",\"done\":true}\n\n",
			[]vigil.Event{{Type: vigil.EventWatchSettled, WatchID: "w1", Done: true}}},
		{"comments, CRLF and no space", ": hello\r\n\r\n: heartbeat\r\nevent:message.created\r\ndata:{\"type\":\"message.created\",\"seq\":7}\r\n\r\n",
			[]vigil.Event{{Type: vigil.EventMessage, Seq: 7}}},
		{"type from the event field", "event: watch.observed\ndata: {\"watch_id\":\"w2\"}\n\n",
			[]vigil.Event{{Type: vigil.EventWatchObserved, WatchID: "w2"}}},
		{"data over lines", "data: {\"type\":\"watch.created\",\ndata: \"watch_id\":\"w3\"}\n\n",
			[]vigil.Event{{Type: vigil.EventWatchCreated, WatchID: "w3"}}},
		{"bad data skipped", "data: not json\n\ndata: {\"type\":\"watch.created\"}\n\n",
			[]vigil.Event{{Type: vigil.EventWatchCreated}}},
		{"unfinished event dropped", "data: {\"type\":\"watch.created\"}\n", nil},
		{"line too long ends the stream", "data: " + strings.Repeat("x", maxEventBytes+1) + "\n\ndata: {\"type\":\"watch.created\"}\n\n", nil},
	}
	for _, tt := range tests {
		var got []vigil.Event
		readEvents(strings.NewReader(tt.stream), func(ev vigil.Event) bool {
			got = append(got, ev)
			return true
		})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: readEvents (-want +got):\n%s", tt.name, diff)
		}
	}
}

// endlessData is an event stream that opens an event and then sends data
// lines without the blank line that would end it: a server or a proxy
// gone wrong. After limit bytes it ends the event (so that a reader
// without a bound emits it, rather than reading for ever) and then the
// stream. It counts what was read from it.
type endlessData struct {
	limit, read int
	pending     []byte
}

func (r *endlessData) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		switch {
		case r.read == 0:
			r.pending = []byte("event: watch.created\ndata: {\"type\":\"watch.created\",\n")
		case r.read < r.limit:
			// Spaces between JSON tokens: the event stays valid JSON.
			r.pending = []byte("data: " + strings.Repeat(" ", 1024) + "\n")
		case r.read < r.limit+1<<20:
			r.pending = []byte("data: \"watch_id\":\"w1\"}\n\n")
			r.read = r.limit + 1<<20
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	r.read += n
	return n, nil
}

// TestReadEventsBoundsOneEvent holds that the data of one event is
// bounded as one line is: data lines that never end an event end the
// stream with an error saying so, once maxEventBytes of data are taken,
// and the event is not emitted. A line too long says so too.
func TestReadEventsBoundsOneEvent(t *testing.T) {
	t.Parallel()
	r := &endlessData{limit: 8 * maxEventBytes}
	var got []vigil.Event
	err := readEvents(r, func(ev vigil.Event) bool {
		got = append(got, ev)
		return true
	})
	if want := fmt.Sprintf("the event stream sent an event of more than %d bytes of data", maxEventBytes); err == nil || err.Error() != want {
		t.Errorf("readEvents() = %v, want %q", err, want)
	}
	if got != nil {
		t.Errorf("readEvents emitted %d events, want none", len(got))
	}
	if r.read > 2*maxEventBytes {
		t.Errorf("readEvents read %d bytes of one event, want it to stop after about %d", r.read, maxEventBytes)
	}
	err = readEvents(strings.NewReader("data: "+strings.Repeat("x", maxEventBytes+1)+"\n\n"), func(vigil.Event) bool { return true })
	if want := fmt.Sprintf("the event stream sent a line of more than %d bytes", maxEventBytes); err == nil || err.Error() != want {
		t.Errorf("readEvents(a line too long) = %v, want %q", err, want)
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	type seen struct {
		Method, Path, Query, ContentType, Key, Depth string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"),
			r.Header.Get("Idempotency-Key"), r.Header.Get("Vigil-Chain-Depth")})
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "DELETE" || strings.HasSuffix(r.URL.Path, "/ack"):
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			fmt.Fprint(w, `{"messages":[],"cursor":0}`)
		case r.URL.Path == "/v1/watches" && r.Method == "GET":
			fmt.Fprint(w, `{"watches":[]}`)
		case strings.HasSuffix(r.URL.Path, "/close"):
			fmt.Fprint(w, `{"cancelled":0}`)
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			fmt.Fprint(w, `{"id":"w/1","kind":"timer","recipient":"r","state":"pending","mode":"until","created_at":"2025-11-30T12:00:00.000Z","polls":0}`)
		}
	}))
	defer ts.Close()
	c, _ := New(ts.URL+"/", token, &Options{HTTPClient: ts.Client()})
	ctx := context.Background()
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", IdempotencyKey: "k1", ChainDepth: 2})
	if err != nil || !w.Replayed {
		t.Errorf("Register() = %+v, %v; want Replayed", w, err)
	}
	after := int64(0)
	calls := []func() error{
		func() error { _, err := c.Wait(ctx, "w/1", 1500*time.Millisecond); return err },
		func() error {
			_, err := c.Watches(ctx, vigil.ListRequest{Labels: map[string]string{"b": "2", "a": "1"}, Limit: 5})
			return err
		},
		func() error {
			_, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "r@x", After: &after})
			return err
		},
		func() error { return c.Ack(ctx, vigil.AckRequest{Recipient: "r", Reader: "me", Seq: 3}) },
		func() error { _, err := c.CloseRecipient(ctx, "r"); return err },
		func() error { return c.Delete(ctx, "w1") },
	}
	for i, f := range calls {
		if err := f(); err != nil {
			t.Errorf("call %d = %v", i, err)
		}
	}
	want := []seen{
		{"POST", "/v1/watches", "", "application/json", "k1", "2"},
		{"GET", "/v1/watches/w%2F1/wait", "timeout=1.5s", "", "", ""},
		{"GET", "/v1/watches", "label=a%3D1&label=b%3D2&limit=5", "", "", ""},
		{"GET", "/v1/recipients/r@x/messages", "after=0", "", "", ""},
		{"POST", "/v1/recipients/r/ack", "", "application/json", "", ""},
		{"POST", "/v1/recipients/r/close", "", "", "", ""},
		{"DELETE", "/v1/watches/w1", "", "", "", ""},
	}
	mu.Lock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	mu.Unlock()
	for _, err := range []error{
		func() error { _, err := c.Watch(ctx, ""); return err }(),
		c.Delete(ctx, ""),
	} {
		if !errors.Is(err, vigil.ErrNotFound) {
			t.Errorf("a call with no id = %v, want not_found", err)
		}
	}
	if _, err := c.Messages(ctx, vigil.MessagesRequest{}); vigil.ErrorField(err) != "recipient" {
		t.Errorf("Messages() with no recipient = %v, want a refusal naming recipient", err)
	}
	if _, err := c.Register(ctx, vigil.RegisterRequest{IdempotencyKey: "a\nb"}); vigil.ErrorField(err) != "idempotency_key" {
		t.Errorf("Register() with a key holding a newline = %v, want a refusal naming idempotency_key", err)
	}
}
