package postgres_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestRateTakeAcrossStores: takes from one bucket spread over two stores
// (two replicas), all released at once, never together take more than
// it holds; it refills at its rate, and a refusal says how long until
// enough is back.
func TestRateTakeAcrossStores(t *testing.T) {
	u := newSchema(t)
	stores := [2]*postgres.Store{open(t, u), open(t, u)}
	t.Cleanup(func() { stores[0].Close(); stores[1].Close() })
	const burst, rate = 10, 0.5
	take := func(i int, now time.Time) (bool, time.Duration, error) {
		return stores[i%2].RateTake(t.Context(), postgres.RateTakeParams{Key: "tok_a", Rate: rate, Burst: burst, N: 1, Now: now})
	}
	var ok atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			<-start
			got, _, err := take(i, at)
			if err != nil {
				t.Error(err)
			}
			if got {
				ok.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := ok.Load(); n != burst {
		t.Fatalf("40 concurrent takes over two stores: %d taken, want the burst, %d", n, burst)
	}
	got, retry, err := take(0, at)
	if err != nil || got || retry != 2*time.Second {
		t.Errorf("a take from the empty bucket = %v, %s, %v; want refused, 2s (1 at 0.5 a second)", got, retry, err)
	}
	// A clock behind the last take (another replica's) refills nothing.
	if got, _, err := take(1, at.Add(-time.Hour)); err != nil || got {
		t.Errorf("a take at an earlier time = %v, %v; want refused", got, err)
	}
	if got, _, err := take(1, at.Add(2*time.Second)); err != nil || !got {
		t.Errorf("a take 2 s later = %v, %v; want taken (one refilled)", got, err)
	}
	if got, _, err := take(0, at.Add(2*time.Second)); err != nil || got {
		t.Errorf("a second take 2 s later = %v, %v; want refused", got, err)
	}
	// Another key has its own bucket; a batch larger than the burst is
	// an invalid request.
	if got, _, err := stores[0].RateTake(t.Context(), postgres.RateTakeParams{Key: "tok_b", Rate: rate, Burst: burst, N: burst, Now: at}); err != nil || !got {
		t.Errorf("another key's first take of the whole burst = %v, %v; want taken", got, err)
	}
	_, _, err = stores[0].RateTake(t.Context(), postgres.RateTakeParams{Key: "tok_c", Rate: rate, Burst: burst, N: burst + 1, Now: at})
	if vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
		t.Errorf("a take past the burst: %v, want invalid_request", err)
	}
	// A take relaxes synchronous_commit for itself only: the connection
	// goes back to the pool with it on.
	one := openWith(t, u, &postgres.Options{MaxConns: 1})
	t.Cleanup(func() { one.Close() })
	if _, _, err := one.RateTake(t.Context(), postgres.RateTakeParams{Key: "tok_a", Rate: rate, Burst: burst, N: 1, Now: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var sc string
	if err := one.Pool().QueryRow(t.Context(), `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "on" {
		t.Errorf("after a take, synchronous_commit = %q, %v; want on", sc, err)
	}
}
