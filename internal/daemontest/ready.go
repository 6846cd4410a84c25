package daemontest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// ReadyClient waits (bounded by ctx) until the daemon at addr, a `vigil
// serve` process of the test's with data directory dataDir, answers
// /readyz, and returns an admin client of it.
func ReadyClient(ctx context.Context, t testing.TB, addr, dataDir string) *client.Client {
	t.Helper()
	for {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the daemon did not become ready")
		case <-time.After(20 * time.Millisecond):
		}
	}
	tok, err := daemon.ReadToken(daemon.TokenPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(addr, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
