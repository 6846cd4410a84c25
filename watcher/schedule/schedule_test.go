package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/schedule"
)

func newWatcher() *schedule.Watcher {
	return schedule.New(schedule.Config{AllowExec: true, MinEvery: time.Second, KillGrace: 200 * time.Millisecond})
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	tests := []struct{ in, want string }{
		{`{"every":"60m","argv":["date"]}`, `{"argv":["date"],"every":"1h","timeout":"1m"}`},
		{`{"cron":" 0  9 * *  1-5 ","tz":"Europe/Paris","shell":"make report","timeout":"2m"}`,
			`{"cron":"0 9 * * 1-5","shell":"make report","timeout":"2m","tz":"Europe/Paris"}`},
	}
	for _, tt := range tests {
		c, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		if err != nil || string(c.Predicate) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, c.Predicate, err, tt.want)
		}
	}
}

// TestRefusals: bad input is refused with its code and a field; a cron
// expression that does not parse names the cron field at fault.
func TestRefusals(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	long := make([]string, 300)
	for i := range long {
		long[i] = "x"
	}
	argv, _ := json.Marshal(long)
	tests := []struct {
		in, code, field, says string
	}{
		{`{"cron":"0 25 * * *","argv":["date"]}`, "invalid_predicate", "predicate.cron", "field 2 (hour)"},
		{`{"cron":"0 * * * mon-xyz","argv":["date"]}`, "invalid_predicate", "predicate.cron", "field 5 (day-of-week)"},
		{`{"cron":"*/0 * * * *","argv":["date"]}`, "invalid_predicate", "predicate.cron", "field 1 (minute)"},
		{`{"cron":"0 * * *","argv":["date"]}`, "invalid_predicate", "predicate.cron", "5 fields"},
		{`{"cron":"0 * * * *","tz":"Mars/Olympus","argv":["date"]}`, "invalid_predicate", "predicate.tz", "IANA"},
		{`{"every":"500ms","argv":["date"]}`, "interval_too_small", "predicate.every", "min_every"},
		{`{"every":"1h","cron":"0 * * * *","argv":["date"]}`, "invalid_predicate", "predicate", "exactly one"},
		{`{"argv":["date"]}`, "invalid_predicate", "predicate", "needs every"},
		{`{"every":"1h","argv":` + string(argv) + `}`, "invalid_predicate", "predicate.argv", "at most 256"},
		{`{"every":"1h"}`, "invalid_predicate", "predicate", "needs argv"},
		{`{"every":"1h","argv":["date"],"timeout":"1h"}`, "invalid_predicate", "predicate.timeout", "at most"},
	}
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		if string(vigil.ErrorCode(err)) != tt.code || vigil.ErrorField(err) != tt.field || !strings.Contains(fmt.Sprint(err), tt.says) {
			t.Errorf("Canonicalize(%.60s) = %v (%s, %s); want %s on %s saying %q", tt.in, err, vigil.ErrorCode(err), vigil.ErrorField(err), tt.code, tt.field, tt.says)
		}
	}
}

func TestNextDue(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	anchor := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	canon := func(s string) json.RawMessage {
		c, err := w.Canonicalize(context.Background(), json.RawMessage(s), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Predicate
	}
	every := canon(`{"every":"10m","argv":["date"]}`)
	cron := canon(`{"cron":"30 9 * * *","tz":"Europe/Paris","argv":["date"]}`)
	tests := []struct {
		pred json.RawMessage
		now  time.Time
		want time.Time
	}{
		{every, anchor, anchor.Add(10 * time.Minute)},
		{every, anchor.Add(10 * time.Minute), anchor.Add(20 * time.Minute)},
		{every, anchor.Add(34 * time.Minute), anchor.Add(40 * time.Minute)},
		{cron, anchor, time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)}, // 09:30 in Paris is 08:30 UTC in winter
	}
	for _, tt := range tests {
		got, err := w.NextDue(tt.pred, anchor, tt.now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("NextDue(%s, now %v) = %v %v, want %v", tt.pred, tt.now, got, err, tt.want)
		}
	}
	if _, err := w.NextDue(json.RawMessage(`{}`), anchor, anchor); err == nil {
		t.Error("an unreadable predicate is due")
	}
}

func TestProbeLeavesANoteWhateverHappens(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	tests := []struct {
		pred, summary string
	}{
		{`{"every":"1h","shell":"echo depth=$VIGIL_CHAIN_DEPTH"}`, "exited 0; output: depth=3"},
		{`{"every":"1h","shell":"echo broken >&2; exit 3"}`, "failed: exited 3; output: broken"},
		{`{"every":"1h","argv":["/nonexistent/prog"]}`, "failed: could not run: /nonexistent/prog: no such program"},
		{`{"every":"1h","shell":"sleep 5","timeout":"300ms"}`, "failed: timed out after 300ms"},
	}
	for _, tt := range tests {
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{Kind: vigil.KindSchedule, Predicate: json.RawMessage(tt.pred), ChainDepth: 2})
		if err != nil || obs.Verdict != vigil.VerdictSatisfied || !strings.HasPrefix(obs.Summary, tt.summary) {
			t.Errorf("Probe(%s) = %+v, %v; want a satisfied note starting %q", tt.pred, obs, err, tt.summary)
		}
	}
	if err := schedule.New(schedule.Config{}).Admit(context.Background(), nil); vigil.ErrorCode(err) != vigil.CodeWatchUnobservable {
		t.Errorf("Admit without exec = %v, want watch_unobservable", err)
	}
}

// TestStoredBelowNewFloor: min_every is a rule of registration. A schedule
// registered at every 2s, read by a daemon started again with a min_every
// of a minute, keeps its calendar and fires: it was read as unreadable,
// never due again (so never armed at a start) and its fire errored.
func TestStoredBelowNewFloor(t *testing.T) {
	t.Parallel()
	c, err := newWatcher().Canonicalize(context.Background(), json.RawMessage(`{"every":"2s","argv":["true"]}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	w := schedule.New(schedule.Config{AllowExec: true, MinEvery: time.Minute, KillGrace: 200 * time.Millisecond})
	if _, err := w.Canonicalize(context.Background(), c.Predicate, time.Time{}); vigil.ErrorCode(err) != vigil.CodeIntervalTooSmall {
		t.Errorf("registering it again under the new floor: %v, want interval_too_small", err)
	}
	anchor := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	if next, err := w.NextDue(c.Predicate, anchor, anchor.Add(3*time.Second)); err != nil || !next.Equal(anchor.Add(4*time.Second)) {
		t.Errorf("NextDue = %v %v, want 2 s on its grid", next, err)
	}
	obs, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindSchedule, Predicate: c.Predicate, Now: anchor})
	if err != nil || obs.Permanent || !strings.HasPrefix(obs.Summary, "exited 0") {
		t.Errorf("Probe = %+v, %v; want a fire that exited 0", obs, err)
	}
}
