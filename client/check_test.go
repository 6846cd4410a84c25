package client_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// deadlineTransport records the deadline of each request whose path ends
// in suffix.
type deadlineTransport struct {
	suffix    string
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, d.suffix) {
		dl, _ := r.Context().Deadline()
		d.mu.Lock()
		d.deadlines = append(d.deadlines, dl)
		d.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestCheckWaitsAsLongAsTheDaemon holds, against a real daemon whose
// max_wait is not the default, that Check bounds its call by the
// daemon's max_wait (GET /v1/daemon says it), not by the default 60 s: it
// gave up after 70 s on a daemon that holds a check for 5 minutes.
func TestCheckWaitsAsLongAsTheDaemon(t *testing.T) {
	t.Parallel()
	cfg := daemontest.Config(t)
	cfg.Limits.MaxWait = 5 * time.Minute
	d := daemontest.Start(t, cfg, nil)
	rt := &deadlineTransport{suffix: "/check"}
	c, err := client.New(d.Addr(), d.Token(), &client.Options{HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	info, err := c.Daemon(ctx)
	if err != nil || info.MaxWait != "5m" {
		t.Fatalf("Daemon() = %+v, %v; want max_wait 5m", info, err)
	}
	pred, _ := json.Marshal(map[string]string{"path": filepath.Join(cfg.Roots[0], "READY")})
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "r", Predicate: pred, Every: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := c.Check(ctx, w.ID)
	if err != nil || got.State != vigil.StatePending {
		t.Fatalf("Check = %+v, %v; want the watch, pending", got, err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.deadlines) != 1 {
		t.Fatalf("%d check requests, want 1", len(rt.deadlines))
	}
	if dl := rt.deadlines[0]; dl.IsZero() || dl.Before(start.Add(cfg.Limits.MaxWait)) {
		t.Errorf("the check's deadline is %v after the call began, want past the daemon's max_wait %v", dl.Sub(start), cfg.Limits.MaxWait)
	}
}

// countingTransport counts the GET /v1/daemon requests it carries.
type countingTransport struct {
	mu   sync.Mutex
	asks int
}

func (ct *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/v1/daemon") {
		ct.mu.Lock()
		ct.asks++
		ct.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (ct *countingTransport) count() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.asks
}

// TestCheckAsksTheDaemonOnce holds that repeated checks ask GET
// /v1/daemon for the daemon's max_wait once, not before every check, and
// again once that answer is a minute old or after a check that failed.
func TestCheckAsksTheDaemonOnce(t *testing.T) {
	t.Parallel()
	cfg := daemontest.Config(t)
	d := daemontest.Start(t, cfg, nil)
	ct := &countingTransport{}
	c, err := client.New(d.Addr(), d.Token(), &client.Options{HTTPClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	client.SetClock(c, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx := t.Context()
	pred, _ := json.Marshal(map[string]string{"path": filepath.Join(cfg.Roots[0], "READY")})
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "r", Predicate: pred, Every: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(id string, asks int) {
		t.Helper()
		got, err := c.Check(ctx, id)
		if id == w.ID && (err != nil || got.State != vigil.StatePending) {
			t.Fatalf("Check = %+v, %v; want the watch, pending", got, err)
		}
		if id != w.ID && err == nil {
			t.Fatalf("Check(%s) = %+v; want an error", id, got)
		}
		if n := ct.count(); n != asks {
			t.Fatalf("%d asks of GET /v1/daemon, want %d", n, asks)
		}
	}
	check(w.ID, 1)
	check(w.ID, 1)
	advance(59 * time.Second)
	check(w.ID, 1)
	advance(time.Second)
	check(w.ID, 2)
	check("w_00000000000000000000000000", 2)
	check(w.ID, 3)
	check(w.ID, 3)
}
