package metrics_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/metrics"
)

func TestSeries(t *testing.T) {
	pending := 7
	m := metrics.New(metrics.Gauges{PendingWatches: func() int { return pending }})
	m.Probed(vigil.KindHTTP, vigil.VerdictPending, 3*time.Millisecond, 40*time.Millisecond)
	m.Probed(vigil.KindHTTP, vigil.VerdictPending, -time.Millisecond, time.Millisecond) // early clocks count as on time
	m.Settled(vigil.KindTimer, vigil.StateFired, 2*time.Millisecond)
	m.Request("POST /v1/watches", 201, time.Millisecond)
	m.Request("", 404, time.Millisecond)
	m.Receipt("webhook", "delivered")

	want := `
# HELP vigil_probes_total Probes made, by kind and verdict.
# TYPE vigil_probes_total counter
vigil_probes_total{kind="http",verdict="pending"} 2
# HELP vigil_settlements_total Watches settled by the scheduler (committed with their mailbox message), by kind and state.
# TYPE vigil_settlements_total counter
vigil_settlements_total{kind="timer",state="fired"} 1
# HELP vigil_http_requests_total API requests answered, by route pattern and status code.
# TYPE vigil_http_requests_total counter
vigil_http_requests_total{code="201",route="POST /v1/watches"} 1
vigil_http_requests_total{code="404",route="none"} 1
# HELP vigil_delivery_receipts_total Push delivery receipts recorded after an attempt, by channel and status.
# TYPE vigil_delivery_receipts_total counter
vigil_delivery_receipts_total{channel="webhook",status="delivered"} 1
# HELP vigil_watches_pending Watches the scheduler holds (pending, standing included).
# TYPE vigil_watches_pending gauge
vigil_watches_pending 7
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"vigil_probes_total", "vigil_settlements_total", "vigil_http_requests_total", "vigil_delivery_receipts_total", "vigil_watches_pending"); err != nil {
		t.Error(err)
	}
	// The lateness histogram: -1 ms is counted in the first bucket.
	if n := testutil.CollectAndCount(m.Registry(), "vigil_probe_lateness_seconds"); n != 1 {
		t.Errorf("probe lateness series = %d, want 1 (one kind)", n)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `vigil_probe_lateness_seconds_bucket{kind="http",le="0.001"} 1`) {
		t.Errorf("lateness buckets wrong:\n%s", rec.Body.String())
	}
}
