package httpwatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
	"github.com/vigil-run/vigil/watcher"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// BenchmarkProbe is one probe of a pending http watch against a local
// server that answers {"done":false}: the request, the body and the match.
// Run with -cpuprofile to see where a probe's CPU goes.
func BenchmarkProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"done":false}`))
	}))
	defer srv.Close()
	w := httpwatch.New(httpwatch.Config{})
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"url":"`+srv.URL+`/w/1","done":{"path":"done","equals":true}}`), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	p := watcher.Probe{WatchID: "w1", Kind: vigil.KindHTTP, Predicate: c.Predicate, Now: time.Now()}
	b.ReportAllocs()
	cpu0 := cputime.Self()
	for b.Loop() {
		obs, err := w.Probe(context.Background(), p)
		if err != nil || obs.Verdict != vigil.VerdictPending {
			b.Fatalf("Probe = %+v, %v; want pending", obs, err)
		}
	}
	// The process's CPU: the probe's and the local server's.
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/probe")
}
