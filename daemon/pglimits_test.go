package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// apiB serves, over store b, the API a second daemon on the same database
// serves (its engine, its token check, its registration limit kept in
// the database, as the daemon keeps it on PostgreSQL), with admin token
// "admin-b".
func apiB(t *testing.T, b *postgres.Store, limits vigil.Limits, rate float64, burst int) *httptest.Server {
	t.Helper()
	eng := engine.New(engine.Config{Store: b, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Limits: limits, Shared: true})
	tokens := auth.New(auth.Config{Store: b})
	srv := httptest.NewUnstartedServer(nil)
	api := httpapi.New(httpapi.Options{Service: eng, AdminToken: "admin-b", AuthenticateFunc: tokens.Authenticate,
		RegisterRate: rate, RegisterBurst: burst, ListenAddr: srv.Listener.Addr().String(),
		RateTakeFunc: func(ctx context.Context, key string, rate float64, burst, n int, now time.Time) (bool, time.Duration, error) {
			return b.RateTake(ctx, postgres.RateTakeParams{Key: key, Rate: rate, Burst: burst, N: n, Now: now})
		}})
	srv.Config.Handler = api.Handler()
	srv.Start()
	t.Cleanup(func() { api.Close(); srv.Close() })
	return srv
}

// TestPostgresReplicaLimits: registrations spread over two daemons on one
// PostgreSQL database, all released at once, hold together to one scoped
// token's rate limit (rate_limited past it, on either), to one watch per
// identity, and to the per-recipient cap (quota_exceeded past it).
func TestPostgresReplicaLimits(t *testing.T) {
	t.Parallel()
	url := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = url
	cfg.RegisterRate, cfg.RegisterBurst = 1, 10
	cfg.Limits.MaxActivePerRecipient = 25
	a := start(t, cfg)
	adminA := newClient(t, a)
	b := replicaB(t, url)
	srvB := apiB(t, b, cfg.Limits, 1, 10)
	adminB, err := client.New(srvB.Listener.Addr().String(), "admin-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tok, err := adminA.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"rated"}})
	if err != nil {
		t.Fatal(err)
	}
	var scoped [2]*client.Client
	for i, addr := range []string{a.Addr(), srvB.Listener.Addr().String()} {
		if scoped[i], err = client.New(addr, tok.Secret, nil); err != nil {
			t.Fatal(err)
		}
	}
	admins := [2]*client.Client{adminA, adminB}
	// race registers n times, on a and b in turn, all released at once.
	race := func(cs [2]*client.Client, n int, req func(i int) vigil.RegisterRequest) ([]*vigil.Watch, []error) {
		ws, errs := make([]*vigil.Watch, n), make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				ws[i], errs[i] = cs[i%2].Register(ctx, req(i))
			})
		}
		close(start)
		wg.Wait()
		return ws, errs
	}

	// The rate: a burst of 10, 1 more a second, for the two together.
	began := time.Now()
	_, errs := race(scoped, 30, func(i int) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "rated", Predicate: json.RawMessage(fmt.Sprintf(`{"in": "%dm"}`, 10+i))}
	})
	elapsed := time.Since(began)
	took := 0
	for i, err := range errs {
		switch {
		case err == nil:
			took++
		case vigil.ErrorCode(err) != vigil.CodeRateLimited:
			t.Errorf("registration %d: %v, want rate_limited or success", i, err)
		}
	}
	if most := 10 + int(elapsed.Seconds()); took < 10 || took > most {
		t.Errorf("30 registrations over two daemons in %s: %d passed the limit, want the burst of 10 (at most %d with what refilled)", elapsed, took, most)
	}

	// One watch per identity.
	at := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Hour).Format(time.RFC3339)
	ws, errs := race(admins, 16, func(int) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "same", Predicate: json.RawMessage(`{"at": "` + at + `"}`)}
	})
	ids := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("same-identity registration %d: %v", i, err)
		}
		ids[ws[i].ID] = true
	}
	if len(ids) != 1 {
		t.Errorf("16 registrations of one identity over two daemons made %d watches, want 1", len(ids))
	}

	// The per-recipient cap of 25.
	_, errs = race(admins, 40, func(i int) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "capped", Predicate: json.RawMessage(fmt.Sprintf(`{"in": "%dm"}`, 10+i))}
	})
	made := 0
	for i, err := range errs {
		switch {
		case err == nil:
			made++
		case vigil.ErrorCode(err) != vigil.CodeQuotaExceeded:
			t.Errorf("capped registration %d: %v, want quota_exceeded or success", i, err)
		}
	}
	if made != 25 {
		t.Errorf("40 registrations for one recipient over two daemons: %d made, want the cap, 25", made)
	}
}
