package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestCapFastPath: far below the global cap, registrations hold the cap
// lock shared and run side by side; the cap still holds exactly when they
// cross into the margin. The margin is shrunk to 5 (the stores have 4
// connections between them, fewer than it, as max_connections bounds them
// in production) so that 200 registrations over two stores cross it.
func TestCapFastPath(t *testing.T) {
	if testingShort(t) {
		return
	}
	var b *Store
	a := internalStore(t, 2, &b)
	// Two transactions in flight (a store of two connections registers
	// on one), each of at most two registrations: 4, within the margin.
	a.margin, b.margin = 5, 5
	a.creates.group, b.creates.group = 2, 2
	const limit = 60
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, full int
	)
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			s := a
			if i%2 == 1 {
				s = b
			}
			w := benchWatch(int64(i))
			w.Recipient = fmt.Sprintf("r%d", i)
			w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
			_, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{Watch: w, MaxActive: limit})
			mu.Lock()
			defer mu.Unlock()
			switch vigil.ErrorCode(err) {
			case "":
				ok++
			case vigil.CodeQuotaExceeded:
				full++
			default:
				t.Errorf("registration %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok != limit || full != 200-limit {
		t.Errorf("200 registrations under a cap of %d: %d made, %d refused; want %d and %d", limit, ok, full, limit, 200-limit)
	}
}

func testingShort(t *testing.T) bool {
	t.Helper()
	if testing.Short() {
		t.Skip("short")
		return true
	}
	return false
}
