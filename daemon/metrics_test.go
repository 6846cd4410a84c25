package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestMetrics: /metrics answers without a token, in the Prometheus text
// format, with what the daemon did — a timer settled, registrations
// answered and refused — and the process's own figures, and names no
// recipient.
func TestMetrics(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1s"}`), Recipient: "private-recipient-name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "nonsense"}`), Recipient: "r"}); vigil.ErrorCode(err) != vigil.CodeInvalidPredicate {
		t.Fatalf("bad registration = %v, want invalid_predicate", err)
	}
	if got := settle(t, c, w.ID); got.State != vigil.StateFired {
		t.Fatalf("timer %s, want fired", got.State)
	}

	resp, err := http.Get(d.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s, want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`vigil_settlements_total{kind="timer",state="fired"} 1`,
		`vigil_settle_lateness_seconds_count{kind="timer"} 1`,
		`vigil_http_requests_total{code="201",route="POST /v1/watches"} 1`,
		`vigil_http_requests_total{code="422",route="POST /v1/watches"} 1`,
		`vigil_watches_pending 0`,
		`vigil_deliveries_queued 0`,
		"\nvigil_long_calls ",
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "private-recipient-name") || strings.Contains(body, w.ID) {
		t.Error("/metrics names a recipient or a watch")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
