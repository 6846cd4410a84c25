package schedule_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the system lacks them

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher/schedule"
)

// fires lists the fires of a cron predicate in zone tz from from (not
// included) to to, in UTC, as the scheduler asks for them: each one
// strictly after the last.
func fires(t *testing.T, w *schedule.Watcher, cron, tz string, from, to time.Time) []string {
	t.Helper()
	pred := canonical(t, w, `{"cron":"`+cron+`","tz":"`+tz+`","argv":["date"]}`)
	var out []string
	now := from
	for i := 0; i < 100; i++ {
		next, err := w.NextDue(pred, from, now)
		if err != nil {
			t.Fatalf("NextDue(%s in %s, %v) = %v", cron, tz, now, err)
		}
		if !next.After(now) {
			t.Fatalf("NextDue(%s in %s, %v) = %v, not after now", cron, tz, now, next)
		}
		if next.After(to) {
			return out
		}
		out = append(out, next.UTC().Format(time.RFC3339))
		now = next
	}
	t.Fatalf("more than 100 fires of %s", cron)
	return nil
}

func canonical(t *testing.T, w *schedule.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestDaylightSaving: a job at a fixed time runs once a day, as crontab(5)
// users expect: once on the day whose hour repeats (the first time round),
// and at the first instant after the gap on the day that skips its time.
// Jobs whose minute or hour is a wildcard follow the clock: an hourly job
// runs each real hour. In two zones that shift by an hour and by half an
// hour, and in one that skips midnight.
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	tests := []struct {
		name, cron, tz string
		from, to       string
		want           []string
	}{
		// New York: 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
		{"skipped time runs after the gap", "30 2 * * *", "America/New_York", "2026-03-06T12:00:00Z", "2026-03-10T12:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"repeated time runs once", "30 1 * * *", "America/New_York", "2026-10-30T12:00:00Z", "2026-11-03T12:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"several fixed times in the gap run once", "0,15,45 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-08T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z"}},
		{"an hourly job runs every real hour across fall-back", "0 * * * *", "America/New_York", "2026-11-01T03:30:00Z", "2026-11-01T08:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		{"an hourly job across spring-forward", "0 * * * *", "America/New_York", "2026-03-08T05:30:00Z", "2026-03-08T08:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"a wildcard minute in the repeated hour follows the clock", "*/30 1 * * *", "America/New_York", "2026-11-01T04:30:00Z", "2026-11-01T07:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z"}},
		{"asked inside the repeated hour, the fixed job waits a day", "30 1 * * *", "America/New_York", "2026-11-01T06:10:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		{"a weekly job on the skipped day", "30 2 * * 0", "America/New_York", "2026-03-01T12:00:00Z", "2026-03-16T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-15T06:30:00Z"}},

		// Lord Howe Island shifts by half an hour: 2026-04-05 02:00 +11 → 01:30 +10:30;
		// 2026-10-04 02:00 +10:30 → 02:30 +11.
		{"half-hour gap", "15 2 * * *", "Australia/Lord_Howe", "2026-10-02T12:00:00Z", "2026-10-05T12:00:00Z",
			[]string{"2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
		{"half-hour repeat", "45 1 * * *", "Australia/Lord_Howe", "2026-04-03T12:00:00Z", "2026-04-06T12:00:00Z",
			[]string{"2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},

		// Havana skips midnight: 2026-03-08 00:00 CST → 01:00 CDT.
		{"midnight skipped", "0 0 * * *", "America/Havana", "2026-03-06T12:00:00Z", "2026-03-09T12:00:00Z",
			[]string{"2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},

		// A zone without daylight saving is unchanged.
		{"UTC", "30 1 * * *", "UTC", "2026-11-01T00:00:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-01T01:30:00Z", "2026-11-02T01:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := fires(t, w, tt.cron, tt.tz, utc(tt.from), utc(tt.to))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fires of %q in %s from %s (-want +got):\n%s", tt.cron, tt.tz, tt.from, diff)
			}
		})
	}
}

// TestNeverFiresIsRefused: a cron expression no calendar day satisfies is
// refused at registration; one that fires rarely is not.
func TestNeverFiresIsRefused(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	for _, cron := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *", "0 0 30,31 feb *"} {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(`{"cron":"`+cron+`","argv":["date"]}`), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != "predicate.cron" ||
			vigil.ErrorMessage(err) != "predicate.cron this schedule never fires: no month has the day it names" {
			t.Errorf("Canonicalize(cron %q) = %v (field %q), want invalid_predicate on predicate.cron: never fires", cron, err, vigil.ErrorField(err))
		}
	}
	for _, cron := range []string{"0 0 29 2 *", "0 0 31 * *", "0 0 30 2 1", "0 0 31 1-4 *", "0 0 * 2 6"} {
		pred := canonical(t, w, `{"cron":"`+cron+`","tz":"UTC","argv":["date"]}`)
		if _, err := w.NextDue(pred, time.Time{}, utc("2026-03-01T00:00:00Z")); err != nil {
			t.Errorf("NextDue(%q) = %v, want a fire", cron, err)
		}
	}
}

// TestNoFireWithinSearchIsRefused: a cron expression whose next fire
// robfig/cron cannot find (it looks five years ahead: the 29th of
// February from 2097, 2100 being no leap year) is refused at
// registration, at the registration's instant, instead of being stored
// and never armed; a stored one says why it has no next fire, as one whose
// tz is gone from the machine does.
func TestNoFireWithinSearchIsRefused(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	pred := json.RawMessage(`{"cron":"0 0 29 2 *","tz":"UTC","argv":["date"]}`)
	_, err := w.Canonicalize(context.Background(), pred, utc("2097-03-01T00:00:00Z"))
	if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != "predicate.cron" ||
		vigil.ErrorMessage(err) != "predicate.cron this schedule has no fire within five years after 2097-03-01T00:00:00Z: it would never fire" {
		t.Errorf("Canonicalize in 2097 = %v (field %q), want invalid_predicate on predicate.cron: no fire within five years", err, vigil.ErrorField(err))
	}
	c, err := w.Canonicalize(context.Background(), pred, utc("2026-03-01T00:00:00Z"))
	if err != nil {
		t.Fatalf("Canonicalize in 2026 = %v, want it accepted (2028-02-29)", err)
	}
	if _, err := w.NextDue(c.Predicate, time.Time{}, utc("2097-03-01T00:00:00Z")); err == nil ||
		err.Error() != `cron "0 0 29 2 *" has no fire within five years after 2097-03-01T00:00:00Z` {
		t.Errorf("NextDue in 2097 = %v, want no fire within five years", err)
	}
	gone := json.RawMessage(`{"cron":"0 9 * * *","tz":"Mars/Olympus","argv":["date"],"timeout":"1m"}`)
	if _, err := w.NextDue(gone, time.Time{}, utc("2026-03-01T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "predicate.tz must be an IANA time zone") {
		t.Errorf("NextDue with a tz this machine lacks = %v, want why", err)
	}
}

// TestEmptyListItemIsRefused: a cron list with an empty item (which
// robfig/cron reads as no value, so ", 0 1 1 0" never fires) is refused,
// naming the field.
func TestEmptyListItemIsRefused(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	for _, cron := range []string{", 0 01 1 0", "0 , * * *", "1,,2 * * * *", "0 0 1, * *", "0 0 * * ,1"} {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(`{"cron":"`+cron+`","argv":["date"]}`), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != "predicate.cron" ||
			!strings.Contains(vigil.ErrorMessage(err), "has an empty item in its list") {
			t.Errorf("Canonicalize(cron %q) = %v; want invalid_predicate on predicate.cron: an empty item", cron, err)
		}
	}
	canonical(t, w, `{"cron":"0,30 9 1,15 * 1,3","tz":"UTC","argv":["date"]}`)
}
