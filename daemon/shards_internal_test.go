package daemon

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestRepairStartsAtTheHorizon: after a lease step, the next repair scan
// reads from the step's horizon (less repairSlack), the start of the
// oldest transaction that had written then, and from the step's clock
// less repairMargin when the horizon is unknown.
func TestRepairStartsAtTheHorizon(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_repair"), &postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &shards{pg: st}
	if !s.repairSince().IsZero() {
		t.Fatalf("before any step the scan reads from %v, want nothing (the shards were loaded whole)", s.repairSince())
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	horizon := now.Add(-time.Minute)
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: horizon})
	if got, want := s.repairSince(), horizon.Add(-repairSlack); !got.Equal(want) {
		t.Errorf("after a step with a horizon a minute back, the scan reads from %v, want %v", got, want)
	}
	s.repair(t.Context(), nil, postgres.Peers{Now: now})
	if got, want := s.repairSince(), now.Add(-repairMargin); !got.Equal(want) {
		t.Errorf("after a step with no horizon, the scan reads from %v, want %v", got, want)
	}
}
