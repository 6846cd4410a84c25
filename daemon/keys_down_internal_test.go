package daemon

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// cutProxy forwards TCP connections to target; while cut it closes those
// it forwarded and refuses new ones (closing them at once): a database
// restarting, or a network cut, that the test ends with open.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cutOff()
		p.wg.Wait()
	})
	return p
}

// proxiedSchema creates a schema as pgtest.Schema does and returns a
// cutProxy to the test database and the schema's URL through it.
func proxiedSchema(t *testing.T, prefix string) (*cutProxy, string) {
	t.Helper()
	u, err := url.Parse(pgtest.Schema(t, prefix))
	if err != nil {
		t.Fatal(err)
	}
	px := newCutProxy(t, u.Host)
	u.Host = px.ln.Addr().String()
	return px, u.String()
}

// cutOff closes every connection forwarded and refuses new ones.
func (p *cutProxy) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// open forwards new connections again.
func (p *cutProxy) open() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// TestKeyCheckWaitsForAnUnavailableDatabase: a replica starting while its
// database cannot be reached (restarting, failing over) compares its
// keys again every second, for startUnavailable at most, and starts once
// the database answers; it failed its start at the first statement. A
// comparison after a lapse (no wait) fails at once, its manager's steps
// going on; one whose database stays away past the bound fails, saying
// it is unavailable.
func TestKeyCheckWaitsForAnUnavailableDatabase(t *testing.T) {
	px, u := proxiedSchema(t, "vigil_keys_down")
	pg, err := postgres.Open(t.Context(), u, &postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	mine := KeyFingerprints{WebhookSecret: []string{"aaaa000000000001"}, LinkKey: "1111000000000000"}
	check := func(wait bool, openAfter int) (int, error) {
		sleeps := 0
		kc := keyCheck{pg: pg, replica: "new", dataDir: "/data/new", mine: replicaPrints{KeyFingerprints: mine}, lease: 15 * time.Second, renew: 5 * time.Second,
			log: slog.New(slog.DiscardHandler),
			sleepFunc: func(_ context.Context, d time.Duration) error {
				if d != time.Second {
					t.Errorf("waited %s for the database, want a second", d)
				}
				if sleeps++; sleeps == openAfter {
					px.open()
				}
				return nil
			}}
		return sleeps, kc.run(t.Context(), wait)
	}

	px.cutOff()
	if sleeps, err := check(true, 3); err != nil || sleeps != 3 {
		t.Fatalf("a start while the database is away for 3 s: %v after %d waits, want it to start after 3", err, sleeps)
	}
	px.cutOff()
	if sleeps, err := check(false, 1); vigil.ErrorCode(err) != vigil.CodeUnavailable || sleeps != 0 {
		t.Fatalf("comparing again after a lapse while the database is away: %v after %d waits, want unavailable at once", err, sleeps)
	}
	if sleeps, err := check(true, -1); vigil.ErrorCode(err) != vigil.CodeUnavailable || sleeps != int(startUnavailable/time.Second) {
		t.Fatalf("a start while the database stays away: %v after %d waits, want unavailable after %d", err, sleeps, int(startUnavailable/time.Second))
	}
	px.open()
	if _, err := check(true, -1); err != nil {
		t.Fatalf("once the database is back: %v", err)
	}
}

// onRecord is a log handler that calls fn with each record's message
// (the tests of this package that wait for a log line use it).
type onRecord func(msg string)

func (h onRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h onRecord) Handle(_ context.Context, r slog.Record) error {
	h(r.Message)
	return nil
}
func (h onRecord) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onRecord) WithGroup(string) slog.Handler      { return h }

// TestStartWaitsForAnUnavailableDatabase: a replica started while its
// database cannot be reached (restarting, failing over) says so once and
// opens its store when the database answers, rather than exiting at the
// first refused connection; and one whose database goes away between
// New and Run waits the same way to load its pending watches, where the
// start failed.
func TestStartWaitsForAnUnavailableDatabase(t *testing.T) {
	px, u := proxiedSchema(t, "vigil_start_down")
	px.cutOff()
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Store, cfg.Replica = "127.0.0.1:0", t.TempDir(), u, "down-0"
	var mu sync.Mutex
	said := map[string]int{}
	log := slog.New(onRecord(func(msg string) {
		if what, ok := strings.CutSuffix(msg, ": the database is unavailable; trying again every second"); ok {
			// The database comes back once the start has said it waits.
			mu.Lock()
			said[what]++
			mu.Unlock()
			px.open()
		}
	}))
	d, err := New(t.Context(), cfg, log)
	if err != nil {
		t.Fatalf("New while the database is away, then back: %v", err)
	}
	px.cutOff()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	select {
	case <-d.primed:
	case err := <-ran:
		t.Fatalf("Run while the database is away, then back: %v", err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v after its context ended", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"opening the store": 1, "loading pending watches": 1}; !maps.Equal(said, want) {
		t.Fatalf("the start said it waits for the database %v, want %v", said, want)
	}
}
