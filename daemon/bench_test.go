package daemon_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
)

// BenchmarkRegisterHTTP registers timer watches due in an hour through the
// Go client against a daemon on loopback, on the SQLite store with
// synchronous=FULL: each call returns once its watch is durable. conc=1 is
// one sequential caller, conc=32 thirty-two callers sharing commits. Run
// with, for example,
//
//	go test ./daemon -run XXX -bench RegisterHTTP -benchtime 10000x -cpuprofile /tmp/reg.prof
func BenchmarkRegisterHTTP(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run("conc="+strconv.Itoa(conc), func(b *testing.B) {
			cfg := testConfig(b.TempDir(), b.TempDir())
			cfg.Limits.MaxActive = 10_000_000
			cfg.Limits.MaxActivePerRecipient = 10_000_000
			d := start(b, cfg)
			c := newClient(b, d)
			at := vigil.FormatTime(time.Now().Add(time.Hour))
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, conc)
			b.ResetTimer()
			cpu0 := cputime.Self()
			for range conc {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						_, err := c.Register(b.Context(), vigil.RegisterRequest{
							Kind: vigil.KindTimer, Recipient: "r" + strconv.FormatInt(i, 10),
							Predicate: []byte(`{"at":"` + at + `"}`), Note: strconv.FormatInt(i, 10),
						})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
			// Client and daemon together: this process is both.
			b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/registration")
		})
	}
}

// BenchmarkRegisterBatchHTTP registers timer watches due in an hour in
// batches of 1 000 through the Go client (POST /v1/watches/batch) from one
// caller, against a daemon on loopback with synchronous=FULL: each call
// returns once its thousand are durable. b.N counts watches.
//
//	go test ./daemon -run XXX -bench RegisterBatchHTTP -benchtime 200000x -cpuprofile /tmp/batch.prof
func BenchmarkRegisterBatchHTTP(b *testing.B) {
	cfg := testConfig(b.TempDir(), b.TempDir())
	cfg.Limits.MaxActive = 10_000_000
	cfg.Limits.MaxActivePerRecipient = 10_000_000
	d := start(b, cfg)
	c := newClient(b, d)
	at := vigil.FormatTime(time.Now().Add(time.Hour))
	reqs := make([]vigil.RegisterRequest, vigil.MaxBatch)
	b.ResetTimer()
	cpu0 := cputime.Self()
	for done := 0; done < b.N; {
		n := min(vigil.MaxBatch, b.N-done)
		for j := range n {
			i := strconv.Itoa(done + j)
			reqs[j] = vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r" + i, Predicate: []byte(`{"at":"` + at + `"}`), Note: i}
		}
		res, err := c.RegisterBatch(b.Context(), reqs[:n])
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Status != vigil.BatchCreated {
				b.Fatalf("%s: %v", r.Status, r.Err)
			}
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "watches/s")
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/watch")
}
