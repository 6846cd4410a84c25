package command_test

import (
	"testing"

	"github.com/vigil-run/vigil"
)

// TestBigIntegerOnStdout: a command watch compares an integer beyond
// 2^53 on stdout exactly, not through float64.
func TestBigIntegerOnStdout(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	for done, want := range map[string]vigil.Verdict{
		`{"path":"id","equals":12345678901234567890}`:     vigil.VerdictPending,
		`{"path":"id","not_equals":12345678901234567890}`: vigil.VerdictSatisfied,
		`{"path":"id","lt":12345678901234567892}`:         vigil.VerdictSatisfied,
	} {
		pred := canon(t, w, `{"shell":"echo '{\"id\":12345678901234567891}'","done":`+done+`}`)
		if got := probe(t, w, pred); got.Verdict != want {
			t.Errorf("Probe(done %s) = %+v, want %s", done, got, want)
		}
	}
}
