package watcher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const kind = vigil.KindHTTP
	tests := []struct {
		name      string
		w         watcher.Watcher
		want      vigil.Observation
		reasonHas string
	}{
		{
			name: "an answer passes through, stamped with the probe time",
			w:    watchertest.Fails(kind),
			want: vigil.Observation{Verdict: vigil.VerdictFailed, At: now, Summary: "failed"},
		},
		{
			name:      "a panic becomes unavailable with the reason",
			w:         watchertest.Panics(kind),
			want:      vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now},
			reasonHas: "the http watcher panicked: watchertest: http fake panics on watch w1",
		},
		{
			name:      "an error becomes unavailable",
			w:         watchertest.Unavailable(kind, false),
			want:      vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now},
			reasonHas: watchertest.ErrUnavailable.Error(),
		},
		{
			name:      "a permanent error becomes permanent",
			w:         watchertest.Unavailable(kind, true),
			want:      vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now, Permanent: true},
			reasonHas: watchertest.ErrUnavailable.Error(),
		},
		{
			name: "no verdict becomes unavailable",
			w: watchertest.Func(kind, func(context.Context, watcher.Probe) (vigil.Observation, error) {
				return vigil.Observation{Summary: "?"}, nil
			}),
			want:      vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now},
			reasonHas: "returned no verdict",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := watcher.Run(context.Background(), tt.w, watcher.Probe{WatchID: "w1", Kind: kind, Now: now})
			if err != nil {
				t.Fatalf("Run = %v, want an observation", err)
			}
			if !strings.Contains(got.Reason, tt.reasonHas) {
				t.Errorf("Run reason = %q, want it to contain %q", got.Reason, tt.reasonHas)
			}
			again, _ := watcher.Run(context.Background(), tt.w, watcher.Probe{WatchID: "w1", Kind: kind, Now: now.Add(time.Second)})
			if !got.Same(&again) {
				t.Errorf("two runs of an unchanged watcher differ: %+v vs %+v (each probe would write)", got, again)
			}
			got.Reason, got.Facts = "", nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunWrongKindIsAnError(t *testing.T) {
	t.Parallel()
	w := watchertest.SettlesAfter(vigil.KindTCP, 1)
	_, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w1", Kind: vigil.KindHTTP})
	if !errors.Is(err, watcher.ErrWrongKind) {
		t.Fatalf("Run(wrong kind) = %v, want ErrWrongKind", err)
	}
	if w.Total() != 0 {
		t.Errorf("Total() = %d after a wrong-kind probe, want 0", w.Total())
	}
}
