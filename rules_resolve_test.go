package vigil_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// refusal is the code and field a table row expects; the zero value
// expects no refusal.
type refusal struct {
	code  vigil.Code
	field string
}

func checkRefusal(t *testing.T, name string, err error, want refusal) bool {
	t.Helper()
	if want == (refusal{}) {
		if err != nil {
			t.Errorf("%s: %v, want no refusal", name, err)
			return false
		}
		return true
	}
	ve, ok := err.(*vigil.Error)
	if !ok || ve.Code != want.code || ve.Field != want.field {
		t.Errorf("%s: %v, want %s on %s", name, err, want.code, want.field)
	}
	return false
}

func TestResolveMode(t *testing.T) {
	t.Parallel()
	probed := vigil.KindSpec{Every: 10 * time.Second, Deadline: time.Hour}
	for _, c := range []struct {
		name  string
		spec  vigil.KindSpec
		asked vigil.Mode
		want  vigil.Mode
		err   refusal
	}{
		{"default", probed, "", vigil.ModeUntil, refusal{}},
		{"until", probed, vigil.ModeUntil, vigil.ModeUntil, refusal{}},
		{"unless", probed, vigil.ModeUnless, vigil.ModeUnless, refusal{}},
		{"unknown", probed, "whenever", "", refusal{vigil.CodeInvalidRequest, "mode"}},
		{"unless standing", vigil.KindSpec{Every: time.Minute, Standing: true}, vigil.ModeUnless, "", refusal{vigil.CodeInvalidRequest, "mode"}},
		{"unless instant", vigil.KindSpec{Deadline: time.Minute, Instant: true}, vigil.ModeUnless, "", refusal{vigil.CodeInvalidRequest, "mode"}},
	} {
		got, err := vigil.ResolveMode("k", c.spec, c.asked)
		if checkRefusal(t, c.name, err, c.err) && got != c.want {
			t.Errorf("%s: mode %q, want %q", c.name, got, c.want)
		}
	}
}

func TestResolveEvery(t *testing.T) {
	t.Parallel()
	l := vigil.DefaultLimits()
	probed := vigil.KindSpec{Every: 10 * time.Second, Deadline: time.Hour}
	for _, c := range []struct {
		name          string
		spec          vigil.KindSpec
		fromPredicate time.Duration
		asked         string
		want          time.Duration
		err           refusal
	}{
		{"kind default", probed, 0, "", 10 * time.Second, refusal{}},
		{"predicate's", probed, time.Minute, "", time.Minute, refusal{}},
		{"asked wins", probed, time.Minute, "30s", 30 * time.Second, refusal{}},
		{"not probed", vigil.KindSpec{Deadline: time.Minute}, 0, "", 0, refusal{}},
		{"not probed, predicate ignored", vigil.KindSpec{Deadline: time.Minute}, time.Minute, "", 0, refusal{}},
		{"not probed, asked", vigil.KindSpec{Deadline: time.Minute}, 0, "10s", 0, refusal{vigil.CodeInvalidRequest, "every"}},
		{"unreadable", probed, 0, "soon", 0, refusal{vigil.CodeInvalidRequest, "every"}},
		{"below the floor", probed, 0, "1ms", 0, refusal{vigil.CodeIntervalTooSmall, "every"}},
		{"at the floor", probed, 0, vigil.FormatDuration(l.MinEvery), l.MinEvery, refusal{}},
		{"longer than a deadline", probed, 0, vigil.FormatDuration(l.MaxDeadline + time.Hour), 0, refusal{vigil.CodeInvalidRequest, "every"}},
	} {
		got, err := vigil.ResolveEvery("k", c.spec, c.fromPredicate, c.asked, l)
		if checkRefusal(t, c.name, err, c.err) && got != c.want {
			t.Errorf("%s: every %v, want %v", c.name, got, c.want)
		}
	}
}

func TestResolveDeadline(t *testing.T) {
	t.Parallel()
	l := vigil.DefaultLimits()
	probed := vigil.KindSpec{Every: 10 * time.Second, Deadline: 30 * time.Minute}
	timer := vigil.KindSpec{Deadline: time.Minute, DeadlineFromStart: true, Instant: true}
	standing := vigil.KindSpec{Every: time.Minute, Standing: true}
	at := t0.Add(2 * time.Hour)
	for _, c := range []struct {
		name  string
		spec  vigil.KindSpec
		asked string
		start time.Time
		want  time.Time
		err   refusal
	}{
		{"kind default from now", probed, "", time.Time{}, t0.Add(30 * time.Minute), refusal{}},
		{"kind default from start", timer, "", at, at.Add(time.Minute), refusal{}},
		{"from now though it starts later", probed, "", at, time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "deadline"}},
		{"none for standing", standing, "", time.Time{}, time.Time{}, refusal{}},
		{"standing refuses one", standing, "1h", time.Time{}, time.Time{}, refusal{vigil.CodeInvalidRequest, "deadline"}},
		{"a duration", probed, "2h", time.Time{}, t0.Add(2 * time.Hour), refusal{}},
		// Rounded up to the millisecond: a deadline never comes before the one asked.
		{"an instant, to the millisecond", probed, "2026-11-30T13:00:00.123456Z", time.Time{}, t0.Add(time.Hour + 124*time.Millisecond), refusal{}},
		{"a whole millisecond stays", probed, "2026-11-30T13:00:00.123Z", time.Time{}, t0.Add(time.Hour + 123*time.Millisecond), refusal{}},
		{"a duration, to the millisecond", probed, "1500us", time.Time{}, t0.Add(2 * time.Millisecond), refusal{}},
		{"unreadable", probed, "later", time.Time{}, time.Time{}, refusal{vigil.CodeInvalidRequest, "deadline"}},
		{"a negative duration", probed, "-1h", time.Time{}, time.Time{}, refusal{vigil.CodeInvalidRequest, "deadline"}},
		{"zero", probed, "0s", time.Time{}, time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "deadline"}},
		{"past", probed, "2026-11-30T11:00:00Z", time.Time{}, time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "deadline"}},
		{"before the start", timer, "1h", at, time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "deadline"}},
		{"too far", probed, vigil.FormatDuration(l.MaxDeadline + time.Hour), time.Time{}, time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "deadline"}},
		{"at the longest", probed, vigil.FormatDuration(l.MaxDeadline), time.Time{}, t0.Add(l.MaxDeadline), refusal{}},
		{"a start too far", timer, "", t0.Add(l.MaxDeadline + time.Hour), time.Time{}, refusal{vigil.CodeDeadlineOutOfRange, "predicate.at"}},
	} {
		got, err := vigil.ResolveDeadline("k", c.spec, c.asked, c.start, t0, l)
		if checkRefusal(t, c.name, err, c.err) && !got.Equal(c.want) {
			t.Errorf("%s: deadline %v, want %v", c.name, got, c.want)
		}
	}
}

func TestResolveStableFor(t *testing.T) {
	t.Parallel()
	l := vigil.DefaultLimits()
	for _, c := range []struct {
		name   string
		asked  string
		stable int
		every  time.Duration
		want   time.Duration
		err    refusal
	}{
		{"none", "", 0, 0, 0, refusal{}},
		{"a window", "5m", 0, time.Minute, 5 * time.Minute, refusal{}},
		{"stable answers", "", 3, time.Minute, 0, refusal{}},
		{"unreadable", "long", 0, time.Minute, 0, refusal{vigil.CodeInvalidRequest, "stable_for"}},
		{"too long", vigil.FormatDuration(l.MaxDeadline + time.Hour), 0, time.Minute, 0, refusal{vigil.CodeInvalidRequest, "stable_for"}},
		{"not probed repeatedly", "5m", 0, 0, 0, refusal{vigil.CodeInvalidRequest, "stable"}},
		{"stable answers, not probed", "", 2, 0, 0, refusal{vigil.CodeInvalidRequest, "stable"}},
	} {
		got, err := vigil.ResolveStableFor("k", c.asked, c.stable, c.every, l)
		if checkRefusal(t, c.name, err, c.err) && got != c.want {
			t.Errorf("%s: stable_for %v, want %v", c.name, got, c.want)
		}
	}
}
