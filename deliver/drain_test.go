package deliver_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
)

// TestDrain: Drain stops the attempts of the watches it names from
// starting (one due meanwhile is dropped, with no receipt, for the next
// holder to resume), waits for those in flight to record their results,
// and, when its context ends first, says how many it did not wait for.
// Undrain lets them start again; the other watches' deliveries go on
// throughout.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		r := newRig(t, func(n int) (int, bool, bool) {
			switch n {
			case 1:
				<-gate // w1's attempt, in flight until the test lets it answer
				return http.StatusServiceUnavailable, false, false
			case 4:
				return 0, true, false // w4's hangs until its timeout
			}
			return http.StatusOK, false, false
		}, nil)
		stop := func(id string) bool { return id != "w2" }
		w1, m1 := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w1, m1)
		synctest.Wait()

		drained := make(chan int, 1)
		go func() { drained <- r.d.Drain(context.Background(), stop) }()
		synctest.Wait()
		select {
		case n := <-drained:
			t.Fatalf("Drain returned %d with w1's attempt in flight", n)
		default:
		}
		w2, m2 := settled(t, r.st, "w2", hookOpts, vigil.StateFired)
		w3, m3 := settled(t, r.st, "w3", hookOpts, vigil.StateFired)
		r.d.Deliver(w2, m2)
		r.d.Deliver(w3, m3)
		synctest.Wait()
		if got := r.receipt(t, "w2", "webhook"); got.Status != vigil.ReceiptDelivered {
			t.Errorf("w2 (not drained): %+v, want delivered", got)
		}
		if w, _ := r.st.WatchGet(t.Context(), "w3"); len(w.Receipts) != 0 {
			t.Errorf("w3 started while drained: receipts %+v", w.Receipts)
		}
		close(gate)
		synctest.Wait()
		select {
		case n := <-drained:
			if n != 0 {
				t.Errorf("Drain = %d once w1 answered, want 0", n)
			}
		default:
			t.Fatal("Drain still waits after w1's attempt recorded its result")
		}
		if got := r.receipt(t, "w1", "webhook"); got.Status != vigil.ReceiptRetrying || got.Attempts != 1 {
			t.Errorf("w1 after the drain: %+v, want retrying after 1 attempt", got)
		}

		r.d.Undrain()
		r.d.Deliver(w3, m3)
		synctest.Wait()
		if got := r.receipt(t, "w3", "webhook"); got.Status != vigil.ReceiptDelivered {
			t.Errorf("w3 after Undrain: %+v, want delivered", got)
		}
		w4, m4 := settled(t, r.st, "w4", hookOpts, vigil.StateFired)
		r.d.Deliver(w4, m4)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n := r.d.Drain(ctx, stop); n != 1 {
			t.Errorf("Drain with w4's attempt hanging past its bound = %d, want 1", n)
		}
		r.stop()
	})
}
