// Package metrics is vigil's Prometheus surface, served by the daemon at
// /metrics: what the scheduler probes and settles and how late, what the
// API answers, what push delivery records, and the process's own figures
// (goroutines, memory, CPU, open files).
//
// Every label takes its values from a small fixed set (kinds, verdicts,
// states, route patterns, status codes, channels, receipt statuses): no
// recipient, watch id, URL or token ever becomes a label, so the series
// stay few and the endpoint reveals nothing about anyone's watches.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigil-run/vigil"
)

// Gauges read the daemon's current state at each scrape. A nil func is
// left out.
type Gauges struct {
	// PendingWatches is how many watches the scheduler holds.
	PendingWatches func() int
	// LongCalls is how many long-polls and event streams are open.
	LongCalls func() int
	// DeliveriesQueued is how many push deliveries are waiting or in flight.
	DeliveriesQueued func() int
}

// Metrics collects vigil's metrics. It implements engine.Metrics; pass
// Request as httpapi's ObserveFunc and Receipt as deliver's ReceiptFunc.
type Metrics struct {
	reg *prometheus.Registry

	probes          *prometheus.CounterVec
	probeLateness   *prometheus.HistogramVec
	probeDuration   *prometheus.HistogramVec
	settlements     *prometheus.CounterVec
	settleLateness  *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	receipts        *prometheus.CounterVec
}

// latenessBuckets spans a millisecond to a minute: a timer fires within
// milliseconds of its instant; a backlog shows as seconds.
var latenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New returns the metrics with the Go runtime's and the process's
// collectors and the gauges g.
func New(g Gauges) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_probes_total", Help: "Probes made, by kind and verdict.",
		}, []string{"kind", "verdict"}),
		probeLateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_probe_lateness_seconds", Help: "How long after its watch was due each probe started, by kind.",
			Buckets: latenessBuckets,
		}, []string{"kind"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_probe_duration_seconds", Help: "How long each probe took, by kind.",
			Buckets: prometheus.DefBuckets,
		}, []string{"kind"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_settlements_total", Help: "Watches settled by the scheduler (committed with their mailbox message), by kind and state.",
		}, []string{"kind", "state"}),
		settleLateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_settle_lateness_seconds", Help: "How long after the instant it was due each settlement committed (a timer: after its own instant), by kind.",
			Buckets: latenessBuckets,
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_requests_total", Help: "API requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_http_request_duration_seconds", Help: "API request durations, long-polls included, by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_delivery_receipts_total", Help: "Push delivery receipts recorded after an attempt, by channel and status.",
		}, []string{"channel", "status"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.probes, m.probeLateness, m.probeDuration, m.settlements, m.settleLateness,
		m.requests, m.requestDuration, m.receipts,
	)
	m.gauges(g)
	return m
}

func (m *Metrics) gauges(g Gauges) {
	gauge := func(name, help string, f func() int) {
		if f != nil {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
				func() float64 { return float64(f()) }))
		}
	}
	gauge("vigil_watches_pending", "Watches the scheduler holds (pending, standing included).", g.PendingWatches)
	gauge("vigil_long_calls", "Open long-polls and event streams.", g.LongCalls)
	gauge("vigil_deliveries_queued", "Push deliveries waiting or in flight.", g.DeliveriesQueued)
}

// Add registers the gauges of g that are set, for the parts of the daemon
// made after the metrics (they report to it as they run). A gauge is
// added once.
func (m *Metrics) Add(g Gauges) { m.gauges(g) }

// Handler serves the metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Registry is the registry the metrics live in, for tests and embedding.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Probed implements engine.Metrics.
func (m *Metrics) Probed(kind vigil.Kind, verdict vigil.Verdict, late, took time.Duration) {
	k := string(kind)
	m.probes.WithLabelValues(k, string(verdict)).Inc()
	m.probeLateness.WithLabelValues(k).Observe(max(late, 0).Seconds())
	m.probeDuration.WithLabelValues(k).Observe(took.Seconds())
}

// Settled implements engine.Metrics.
func (m *Metrics) Settled(kind vigil.Kind, state vigil.State, late time.Duration) {
	k := string(kind)
	m.settlements.WithLabelValues(k, string(state)).Inc()
	m.settleLateness.WithLabelValues(k).Observe(max(late, 0).Seconds())
}

// Request records one answered API request; pattern is the route's
// pattern, "" when no route matched.
func (m *Metrics) Request(pattern string, status int, took time.Duration) {
	if pattern == "" {
		pattern = "none"
	}
	m.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(pattern).Observe(took.Seconds())
}

// Receipt records one delivery receipt.
func (m *Metrics) Receipt(channel, status string) {
	m.receipts.WithLabelValues(channel, status).Inc()
}
