package httpapi_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/httpapi"
)

// openStreams opens, through c, an event stream and two long-polls that
// would each last a minute, and returns the stream and the long-polls'
// results.
func openStreams(t *testing.T, ctx context.Context, f *fake, c *client.Client) (<-chan vigil.Event, <-chan error) {
	t.Helper()
	f.set(func(f *fake) { f.block = true })
	events, err := c.Subscribe(ctx, vigil.EventFilter{})
	if err != nil {
		t.Fatalf("Subscribe() = %v", err)
	}
	polls := make(chan error, 2)
	go func() {
		_, err := c.Wait(ctx, "w1", time.Minute)
		polls <- err
	}()
	go func() {
		_, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "agent-7", Wait: time.Minute})
		polls <- err
	}()
	return events, polls
}

// ended waits for the event stream to close and both polls to return,
// and returns the polls' errors.
func ended(t *testing.T, events <-chan vigil.Event, polls <-chan error) []error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-events:
		case <-timeout:
			t.Fatal("the event stream did not end")
		}
	}
	var errs []error
	for range 2 {
		select {
		case err := <-polls:
			errs = append(errs, err)
		case <-timeout:
			t.Fatal("a long-poll did not end")
		}
	}
	return errs
}

// TestShutdownEndsStreams closes the server under open streams and
// long-polls, through http.Server.Shutdown with Close registered, and
// checks that everything ends and no goroutine is left.
func TestShutdownEndsStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFake()
	api := httpapi.New(httpapi.Options{Service: f, AdminToken: adminToken, Heartbeat: 50 * time.Millisecond})
	ts := httptest.NewUnstartedServer(api.Handler())
	ts.Config.RegisterOnShutdown(api.Close)
	ts.Start()
	hc := ts.Client()
	c, err := client.New(ts.URL, adminToken, &client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	events, polls := openStreams(t, context.Background(), f, c)
	waitFor(t, func() bool {
		return f.subscribers() == 1 && f.snapshot().messages.Wait != 0 && f.snapshot().waited != 0
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v, want the streams to end", err)
	}
	for _, err := range ended(t, events, polls) {
		if !errors.Is(err, &vigil.Error{Code: vigil.CodeUnavailable}) {
			t.Errorf("a long-poll cut by shutdown = %v, want unavailable", err)
		}
	}
	ts.Close()
	hc.CloseIdleConnections()
	if n := f.subscribers(); n != 0 {
		t.Errorf("%d subscriptions left open", n)
	}

	// A stream opened after Close ends at once.
	api2 := httpapi.New(httpapi.Options{Service: f, AdminToken: adminToken})
	api2.Close()
	ts2 := httptest.NewServer(api2.Handler())
	defer ts2.Close()
	c2, _ := client.New(ts2.URL, adminToken, &client.Options{HTTPClient: ts2.Client()})
	if _, err := c2.Wait(context.Background(), "w1", time.Minute); !errors.Is(err, &vigil.Error{Code: vigil.CodeUnavailable}) {
		t.Errorf("Wait() after Close = %v, want unavailable", err)
	}
}

// TestClientGoneEndsStreams has the client give up on open streams and
// long-polls; the server's handlers and the service's calls end too.
func TestClientGoneEndsStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFake()
	api := httpapi.New(httpapi.Options{Service: f, AdminToken: adminToken})
	ts := httptest.NewServer(api.Handler())
	hc := ts.Client()
	c, err := client.New(ts.URL, adminToken, &client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	events, polls := openStreams(t, ctx, f, c)
	waitFor(t, func() bool {
		return f.subscribers() == 1 && f.snapshot().messages.Wait != 0 && f.snapshot().waited != 0
	})
	cancel()
	for _, err := range ended(t, events, polls) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a long-poll the caller cancelled = %v, want context.Canceled", err)
		}
	}
	waitFor(t, func() bool { return f.subscribers() == 0 })
	ts.Close() // returns only once every handler has
	hc.CloseIdleConnections()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
