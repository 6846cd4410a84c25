package daemon_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestShutdownDrain: with shutdown_drain, a daemon whose shutdown began
// still accepts connections until the drain ends: /readyz answers 503
// saying it stops, /healthz 200, the API serves what it is sent and
// /v1/daemon says the role is stopping; once
// the drain ends (the test ends it, no clock), Run returns nil and the
// listener is closed.
func TestShutdownDrain(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.ShutdownDrain = 30 * time.Second
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan time.Time)
	var asked time.Duration
	d.SetDrainWait(func(dur time.Duration) <-chan time.Time { asked = dur; return drained })
	r := daemontest.Run(t, d)
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop() }()
	<-d.Stopping()

	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, d.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+d.Token())
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s during the drain: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const want = `{"error":{"code":"unavailable","message":"not ready: vigil is stopping"}}` + "\n"
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != want {
		t.Errorf("GET /readyz during the drain = %d %q, want 503 %q", code, body, want)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz during the drain = %d %s, want 200", code, body)
	}
	if code, body := get("/v1/watches"); code != http.StatusOK || !strings.Contains(body, `"watches"`) {
		t.Errorf("GET /v1/watches during the drain = %d %s, want 200", code, body)
	}
	if code, body := get("/v1/daemon"); code != http.StatusOK || !strings.Contains(body, `"role":"stopping"`) {
		t.Errorf("GET /v1/daemon during the drain = %d %s, want role stopping", code, body)
	}
	close(drained)
	if err := <-stopped; err != nil {
		t.Errorf("Run = %v after the drain, want nil", err)
	}
	if asked != 30*time.Second {
		t.Errorf("the drain waited %s, want shutdown_drain (30s)", asked)
	}
	if c, err := net.Dial("tcp", d.Addr()); err == nil {
		c.Close()
		t.Error("the listener still accepts after the drain")
	}
}
