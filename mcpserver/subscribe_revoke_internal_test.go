package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// sharedInbox is a service with an empty inbox whose event stream the
// test feeds.
type sharedInbox struct {
	vigil.Service
	events chan vigil.Event
}

func (f *sharedInbox) Messages(context.Context, vigil.MessagesRequest) (vigil.MessagesPage, error) {
	return vigil.MessagesPage{Messages: []*vigil.Message{}}, nil
}

func (f *sharedInbox) Subscribe(context.Context, vigil.EventFilter) (<-chan vigil.Event, error) {
	return f.events, nil
}

// TestHTTPSubscriptionFollowsItsTokens: two sessions with different
// tokens for A subscribe to A's inbox. Once the first token is revoked,
// the listener's next recheck drops that session (and closes it): a
// message afterwards reaches the second session only. Once the second is
// revoked too, the listener ends. httpapi's own recheck is an hour away,
// so the sessions are idle as far as it goes.
func TestHTTPSubscriptionFollowsItsTokens(t *testing.T) {
	t.Parallel()
	svc := &sharedInbox{events: make(chan vigil.Event)}
	var mu sync.Mutex
	revoked := map[string]bool{}
	api := httpapi.New(httpapi.Options{
		Service: svc,
		Recheck: time.Hour,
		AuthenticateFunc: func(_ context.Context, token string) (vigil.Scope, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if token != "tok-a" && token != "tok-b" || revoked[token] {
				return vigil.Scope{}, false, nil
			}
			return vigil.Scope{Recipients: []string{"A"}, TokenID: token}, true, nil
		},
	})
	h := NewHandler(svc, nil)
	ticks := make(chan time.Time)
	h.s.subs.ticker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	api.Mount("/mcp", h)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		h.Close()
		api.Close()
		srv.Close()
	})
	dial := func(token string) (*mcp.ClientSession, chan string) {
		t.Helper()
		updates := make(chan string, 10)
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		transport := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{token, tr}}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updates <- req.Params.URI },
		}).Connect(t.Context(), transport, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: InboxURI("A")}); err != nil {
			t.Fatal(err)
		}
		return cs, updates
	}
	csA, updatesA := dial("tok-a")
	_, updatesB := dial("tok-b")
	h.s.subs.mu.Lock()
	l := h.s.subs.listeners[InboxURI("A")]
	h.s.subs.mu.Unlock()
	if l == nil {
		t.Fatal("no listener follows A's inbox after two subscriptions")
	}
	receive := func(updates chan string, who string) {
		t.Helper()
		select {
		case <-updates:
		case <-time.After(10 * time.Second):
			t.Fatalf("the session of %s was not told of a message in A's inbox", who)
		}
	}
	svc.events <- vigil.Event{Type: vigil.EventMessage}
	receive(updatesA, "tok-a")
	receive(updatesB, "tok-b")

	mu.Lock()
	revoked["tok-a"] = true
	mu.Unlock()
	ticks <- time.Now() // the listener re-checks before it reads the next event
	svc.events <- vigil.Event{Type: vigil.EventMessage}
	receive(updatesB, "tok-b")
	closed := make(chan struct{})
	go func() { _ = csA.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the session of the revoked tok-a is still open, want it closed at the listener's recheck")
	}
	select {
	case <-updatesA:
		t.Error("the session of the revoked tok-a was told of a message in A's inbox")
	default:
	}

	mu.Lock()
	revoked["tok-b"] = true
	mu.Unlock()
	ticks <- time.Now()
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener of A's inbox still runs with no subscriber whose token is valid")
	}
	h.s.subs.mu.Lock()
	n := len(h.s.subs.listeners)
	h.s.subs.mu.Unlock()
	if n != 0 {
		t.Errorf("%d listeners left, want none", n)
	}
}
