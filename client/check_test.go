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
