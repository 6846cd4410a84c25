package daemon

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestArmHungPrimeGivenUp: priming shards taken (which Gain hands to arm)
// that hangs on a database that stopped answering without a reset is
// given up after a lease and tried again, with twice the bound: the
// shards are armed once the database answers, where arm hung on the dead
// connection for good and every shard taken after waited behind it.
func TestArmHungPrimeGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bounds []time.Duration
		armed := make(chan []int, 1)
		s := &shards{log: slog.New(slog.DiscardHandler), gained: make(chan []int, 1), primeFor: 15 * time.Second,
			holds: func(int) bool { return true }}
		s.primeFn = func(ctx context.Context, shards []int) error {
			dl, _ := ctx.Deadline()
			bounds = append(bounds, time.Until(dl))
			if len(bounds) == 1 {
				<-ctx.Done() // the dead connection: only the bound ends it
				return ctx.Err()
			}
			armed <- shards
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.arm(ctx)
		s.gained <- []int{3, 7}
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case got := <-armed:
			if len(got) != 2 {
				t.Fatalf("armed %v, want [3 7]", got)
			}
		default:
			t.Fatalf("a minute on, the shards are not armed: priming that hung was never given up (bounds %v)", bounds)
		}
		if len(bounds) != 2 || bounds[0] != 15*time.Second || bounds[1] != 30*time.Second {
			t.Errorf("priming bounds %v, want [15s 30s] (a lease, then twice)", bounds)
		}
	})
}
