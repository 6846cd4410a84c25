package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
	"github.com/vigil-run/vigil/watcher/schedule"
)

func newScheduleEnv(t *testing.T) *env {
	return newEnv(t, envOpts{watchers: []watcher.Watcher{schedule.New(schedule.Config{AllowExec: true}),
		run.New(run.Config{AllowExec: true, Dir: t.TempDir()})}})
}

func read(t *testing.T, v *env, reader string) []*vigil.Message {
	t.Helper()
	p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-1", Reader: reader, Ack: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.Messages
}

// TestScheduleNotesReachEachReaderOnce: each fire of a schedule leaves one
// note; two readers each see each note once.
func TestScheduleNotesReachEachReaderOnce(t *testing.T) {
	t.Parallel()
	v := newScheduleEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindSchedule, Predicate: obj(`{"every":"1m","shell":"echo fire"}`)})
	if !w.Standing || !w.Deadline.IsZero() {
		t.Fatalf("a schedule is standing %v with deadline %v", w.Standing, w.Deadline)
	}
	if next, _, _ := v.sched.Info(w.ID); !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first fire due %v, want one interval after creation", next)
	}
	v.tick(t0.Add(time.Minute))
	v.tick(t0.Add(2 * time.Minute))
	for _, r := range []string{"a", "b"} {
		got := read(t, v, r)
		if len(got) != 2 || got[0].Type != vigil.MessageNote || !strings.Contains(got[0].Text, "exited 0; output: fire") {
			t.Fatalf("reader %s got %+v, want two notes", r, got)
		}
	}
	v.tick(t0.Add(3 * time.Minute))
	for _, r := range []string{"a", "b"} {
		if got := read(t, v, r); len(got) != 1 {
			t.Fatalf("reader %s got %d messages after the third fire, want 1 new", r, len(got))
		}
		if got := read(t, v, r); len(got) != 0 {
			t.Fatalf("reader %s got %d messages again", r, len(got))
		}
	}
}

// TestScheduleRefusalsWriteNothing: bad input to the schedule and run
// kinds, and a registration from too deep a chain, are refused at
// registration with their code, and nothing reaches the store.
func TestScheduleRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	v := newScheduleEnv(t)
	long := `["x"` + strings.Repeat(`,"x"`, 300) + `]`
	for _, tt := range []struct {
		kind  vigil.Kind
		pred  string
		code  vigil.Code
		field string
	}{
		{vigil.KindSchedule, `{"cron":"61 * * * *","argv":["date"]}`, vigil.CodeInvalidPredicate, "predicate.cron"},
		{vigil.KindSchedule, `{"every":"1h","argv":` + long + `}`, vigil.CodeInvalidPredicate, "predicate.argv"},
		{vigil.KindSchedule, `{"every":"10ms","argv":["date"]}`, vigil.CodeIntervalTooSmall, "predicate.every"},
		{vigil.KindRun, `{"argv":` + long + `}`, vigil.CodeInvalidPredicate, "predicate.argv"},
		{vigil.KindRun, `{"argv":["date"],"tail":-1}`, vigil.CodeInvalidPredicate, "predicate.tail"},
		{vigil.KindSchedule, `{"every":"1h","argv":["date"]}`, vigil.CodeChainTooDeep, ""},
	} {
		r := vigil.RegisterRequest{Kind: tt.kind, Recipient: "r", Predicate: obj(tt.pred)}
		if tt.code == vigil.CodeChainTooDeep {
			r.ChainDepth = 4
		}
		_, err := v.eng.Register(v.ctx, r)
		if vigil.ErrorCode(err) != tt.code || vigil.ErrorField(err) != tt.field {
			t.Errorf("Register(%.50s) = %v, want %s on %s", tt.pred, err, tt.code, tt.field)
		}
	}
	if n := v.store.writes.Load(); n != 0 {
		t.Fatalf("refused registrations wrote %d times", n)
	}
}
