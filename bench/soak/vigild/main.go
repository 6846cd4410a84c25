// Command vigild is the vigil daemon exactly as cmd/vigil builds it, plus
// what the soak needs beyond the daemon's own /metrics: the live heap and
// the runtime's profiles (and the goroutine count, for a vigil that serves
// no /metrics). When VIGIL_SOAK_METRICS_FILE names a file, it listens on a
// second loopback port of its own, writes that address to the file, and
// serves there, apart from the API:
//
//	/metrics         go_goroutines, go_heap_live_bytes, go_memory_total_bytes
//	                 (Prometheus text format)
//	/debug/pprof/    the runtime profiles (goroutine dumps, heap, CPU)
//
// Everything else (the API, its listener, the store) is cmd/vigil's code
// path: cli.New(…).ExecuteContext, as in cmd/vigil/main.go.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"syscall"

	"github.com/vigil-run/vigil/cli"
)

// EnvMetricsFile names the file the sidecar's address is written to.
const EnvMetricsFile = "VIGIL_SOAK_METRICS_FILE"

func main() {
	if f := os.Getenv(EnvMetricsFile); f != "" {
		if err := sidecar(f); err != nil {
			fmt.Fprintln(os.Stderr, "vigild: metrics sidecar:", err)
			os.Exit(2)
		}
	}
	// The rest is cmd/vigil/main.go.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.New(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	os.Exit(cli.ExitCode(err))
}

// sidecar starts the metrics listener on a free loopback port and writes
// its address to file.
func sidecar(file string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", serveMetrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// serveMetrics writes the figures in the Prometheus text format. It reads
// runtime/metrics, which does not stop the world.
func serveMetrics(w http.ResponseWriter, _ *http.Request) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
	}
	metrics.Read(samples)
	val := func(s metrics.Sample) uint64 {
		if s.Value.Kind() == metrics.KindUint64 {
			return s.Value.Uint64()
		}
		return 0
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(w, "# HELP go_heap_live_bytes Heap bytes marked live by the last GC.\n# TYPE go_heap_live_bytes gauge\ngo_heap_live_bytes %d\n", val(samples[0]))
	fmt.Fprintf(w, "# HELP go_memory_total_bytes All memory mapped by the Go runtime.\n# TYPE go_memory_total_bytes gauge\ngo_memory_total_bytes %d\n", val(samples[1]))
}
