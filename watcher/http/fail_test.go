package httpwatch_test

import (
	"testing"

	"github.com/vigil-run/vigil"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// TestFailOnMissingPath: a fail matcher whose path the body does not hold
// matches nothing, whatever its operator, so the watch stays pending (its
// done not matched yet) rather than failing; only exists:false matches a
// missing path.
func TestFailOnMissingPath(t *testing.T) {
	t.Parallel()
	srv := server(t)
	w := httpwatch.New(httpwatch.Config{})
	for _, tt := range []struct {
		fail string
		want vigil.Verdict
	}{
		{`{"path":"error.code","equals":0}`, vigil.VerdictPending},
		{`{"path":"error.code","not_equals":0}`, vigil.VerdictPending},
		{`{"path":"error","not_equals":null}`, vigil.VerdictPending},
		{`{"path":"error.message","contains":"x"}`, vigil.VerdictPending},
		{`{"path":"error.message","matches":".*"}`, vigil.VerdictPending},
		{`{"path":"error","truthy":true}`, vigil.VerdictPending},
		{`{"path":"error","truthy":false}`, vigil.VerdictPending},
		{`{"path":"error.code","gt":-1}`, vigil.VerdictPending},
		{`{"path":"error.code","lte":1}`, vigil.VerdictPending},
		{`{"path":"error","exists":true}`, vigil.VerdictPending},
		{`{"path":"error","exists":false}`, vigil.VerdictFailed},
		// A list matches only when all of it does: the missing path keeps
		// the one present from failing the watch, whether it comes first
		// or last in the list's canonical order (by canonical JSON).
		{`[{"path":"status.phase","equals":"Ready"},{"path":"error","contains":"x"}]`, vigil.VerdictPending},
		{`[{"path":"error","matches":".*"},{"path":"status.phase","equals":"Ready"}]`, vigil.VerdictPending},
	} {
		t.Run(tt.fail, func(t *testing.T) {
			t.Parallel()
			pred := canon(t, w, `{"url":"`+srv.URL+`/ready","done":{"path":"status.phase","equals":"Done"},"fail":`+tt.fail+`}`)
			if got := probe(t, w, pred); got.Verdict != tt.want {
				t.Errorf("Probe(fail %s on a body without it) = %+v, want %s", tt.fail, got, tt.want)
			}
		})
	}
	// A body that is not JSON holds no path: even exists:false does not
	// match it.
	pred := canon(t, w, `{"url":"`+srv.URL+`/html","done":{"path":"a","equals":1},"fail":{"path":"error","exists":false}}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictPending {
		t.Errorf("Probe(fail exists:false on a body that is not JSON) = %+v, want pending", got)
	}
}
