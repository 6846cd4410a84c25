// Package schedule is the watcher for kind schedule: a standing watch that
// runs a program on a calendar and leaves what it printed as a note in the
// recipient's mailbox, one per fire.
//
// A predicate gives exactly one calendar,
//
//	every  an interval ("1h"), at least the daemon's min_every; fires
//	       fall on a grid counted from the watch's creation, the first
//	       one interval after it
//	cron   a standard 5-field expression (minute hour day-of-month month
//	       day-of-week, as crontab(5)), parsed by robfig/cron; with tz,
//	       an IANA zone ("Europe/Paris"), read in that zone, else in the
//	       daemon's local time
//
// and the program as a command predicate spells it (exactly one of argv
// or shell, optional cwd and env; see package command), with timeout, how
// long one run may take (60s by default, at most 10m). A cron expression
// that does not parse is refused naming the cron field at fault, and one
// that no calendar day satisfies ("0 0 30 2 *"), or with no fire within
// the five years robfig/cron searches from the registration, is refused:
// it would never fire. A stored one whose next fire cannot be computed
// (its tz gone from the machine's time zone database) makes NextDue say
// why, and the engine settles the watch errored.
//
// Daylight saving time is handled as crontab(5) users expect. A job at a
// fixed time (neither its minute nor its hour field starts with "*") runs
// once a day: on the day whose hour repeats, the first time round only;
// on the day that skips its time, at the first instant after the gap
// (02:30 in New York on the spring-forward day runs at 03:00; several
// fixed times in the gap run once). A job whose minute or hour is a
// wildcard follows the clock: an hourly job runs every real hour, twice
// at 01:00 when the clock falls back, not at all at 02:00 when it springs
// forward.
//
// Each fire runs the program once, bounded like a command probe (its own
// process group, terminated at the timeout, the last 64 KiB of output
// kept), with VIGIL_CHAIN_DEPTH set to the watch's depth + 1. Every fire
// answers satisfied, and the scheduler mails it as a note: "exited 0"
// with the end of the output, or what went wrong (a non-zero exit, a
// timeout, a program that cannot be found). Facts hold exit_code and the
// last 4 KiB of stdout and stderr.
//
// The watcher keeps the calendar (engine.NextDuer): the scheduler asks
// it when each fire is due. A watch has at most one run in flight, and the
// next fire is counted from when a run ends, so a fire that comes due
// while the last run still goes is skipped, never queued.
//
// Schedule watches run programs: Admit refuses them unless the daemon
// allows exec.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
)

// Bounds of a schedule predicate.
const (
	// storedFloor is the shortest interval of a stored predicate: any,
	// since min_every is a rule of registration. A daemon started again
	// with a higher min_every read its schedules below it as unreadable:
	// the first fire errored the watch, and one loaded at a start was
	// never armed again, pending for ever.
	storedFloor = time.Nanosecond
	// MaxEvery is the longest interval.
	MaxEvery = 31 * 24 * time.Hour
	// noteOutput is how much of the end of the output a note's sentence holds.
	noteOutput = 400
)

// cronFields names the five fields of a cron expression.
var cronFields = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}

// cronParser parses exactly five fields, no descriptors or seconds.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Config configures the schedule watcher.
type Config struct {
	// AllowExec allows schedule watches (the daemon's --allow-exec).
	AllowExec bool
	// MinEvery is the shortest interval (the daemon's min_every; default 1s).
	MinEvery time.Duration
	// KillGrace is passed to the runner (see proc.Runner).
	KillGrace time.Duration
}

// Watcher answers schedule watches.
type Watcher struct {
	allowExec bool
	minEvery  time.Duration
	runner    proc.Runner
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a schedule watcher.
func New(cfg Config) *Watcher {
	if cfg.MinEvery <= 0 {
		cfg.MinEvery = time.Second
	}
	return &Watcher{allowExec: cfg.AllowExec, minEvery: cfg.MinEvery, runner: proc.Runner{KillGrace: cfg.KillGrace}}
}

type input struct {
	proc.Program
	Every   string `json:"every,omitempty"`
	Cron    string `json:"cron,omitempty"`
	TZ      string `json:"tz,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

type canonical struct {
	proc.Program
	Every   string `json:"every,omitempty"`
	Cron    string `json:"cron,omitempty"`
	TZ      string `json:"tz,omitempty"`
	Timeout string `json:"timeout"`
}

type spec struct {
	canonical
	every   time.Duration
	sched   *cron.SpecSchedule // read in UTC: wall-clock times
	fixed   bool               // neither minute nor hour is a wildcard
	loc     *time.Location
	timeout time.Duration
}

// Kind returns vigil.KindSchedule.
func (*Watcher) Kind() vigil.Kind { return vigil.KindSchedule }

// Notes reports that each fire is a note, not a change.
func (*Watcher) Notes() bool { return true }

// Canonicalize validates the predicate and returns its canonical form.
func (w *Watcher) Canonicalize(_ context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	s, err := w.parse(raw, w.minEvery)
	if err != nil {
		return watcher.Canonical{}, err
	}
	if s.every == 0 && !now.IsZero() {
		// One whose next fire cannot be found would never fire: no
		// calendar day names it, or none within the five years
		// robfig/cron searches (the 29th of February around 2100).
		if _, ok := s.next(now); !ok {
			return watcher.Canonical{}, watcher.InvalidPredicate("cron", "this schedule has no fire within five years after %s: it would never fire", now.UTC().Format(time.RFC3339))
		}
	}
	b, err := watcher.Encode(s.canonical)
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

// parse reads a predicate whose every is at least floor: the daemon's
// min_every for one being registered, storedFloor for a stored one.
func (w *Watcher) parse(raw json.RawMessage, floor time.Duration) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	if err := in.Program.Check(""); err != nil {
		return nil, err
	}
	s.Program = in.Program
	var err error
	switch {
	case in.Every != "" && in.Cron != "":
		return nil, watcher.InvalidPredicate("", "has both every and cron: give exactly one")
	case in.Every != "":
		if in.TZ != "" {
			return nil, watcher.InvalidPredicate("tz", "applies to cron only")
		}
		d, err := vigil.ParseDuration(in.Every)
		if err != nil {
			return nil, watcher.InvalidPredicate("every", "must be a duration like 15m or 1h")
		}
		if d < floor {
			return nil, &vigil.Error{Code: vigil.CodeIntervalTooSmall, Field: watcher.PredicateField("every"),
				Message: fmt.Sprintf("predicate.every %s is below the floor of %s (min_every)", vigil.FormatDuration(d), vigil.FormatDuration(floor))}
		}
		if d > MaxEvery {
			return nil, watcher.InvalidPredicate("every", "must be at most %s", vigil.FormatDuration(MaxEvery))
		}
		s.every, s.Every = d, vigil.FormatDuration(d)
	case in.Cron != "":
		if s.sched, err = parseCron(in.Cron); err != nil {
			return nil, err
		}
		fields := strings.Fields(in.Cron)
		s.Cron = strings.Join(fields, " ")
		s.fixed = !wildcard(fields[0]) && !wildcard(fields[1])
		s.loc = time.Local
		if in.TZ != "" {
			if s.loc, err = time.LoadLocation(in.TZ); err != nil || in.TZ == "Local" || len(in.TZ) > 64 {
				return nil, watcher.InvalidPredicate("tz", "must be an IANA time zone like Europe/Paris or UTC")
			}
			s.TZ = in.TZ
		}
	default:
		return nil, watcher.InvalidPredicate("", "needs every (an interval like 1h) or cron (5 fields like \"0 * * * *\")")
	}
	if s.timeout, err = watcher.DurationField("timeout", in.Timeout, proc.DefaultTimeout, proc.MaxTimeout); err != nil {
		return nil, err
	}
	s.Timeout = vigil.FormatDuration(s.timeout)
	return s, nil
}

// wildcard reports whether a cron field starts with a star (or "?"), as
// cron tells fixed-time jobs from ones that follow the clock.
func wildcard(field string) bool {
	return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?")
}

// parseCron parses a 5-field expression; a refusal names the cron field at
// fault, or says that the expression never fires. The schedule is read in
// UTC, which has no daylight saving: it gives wall-clock times, which
// spec.next maps onto the zone.
func parseCron(expr string) (*cron.SpecSchedule, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, watcher.InvalidPredicate("cron", "must have 5 fields (minute hour day-of-month month day-of-week), not %d", len(fields))
	}
	for i, f := range fields {
		if slices.Contains(strings.Split(f, ","), "") {
			// robfig/cron reads an empty item as no value at all: a
			// minute field of "," would never fire.
			return nil, watcher.InvalidPredicate("cron", "field %d (%s) %q has an empty item in its list", i+1, cronFields[i], watcher.Clip(f, 40))
		}
		probe := []string{"*", "*", "*", "*", "*"}
		probe[i] = f
		if _, err := cronParser.Parse(strings.Join(probe, " ")); err != nil {
			return nil, watcher.InvalidPredicate("cron", "field %d (%s) %q does not parse: %v", i+1, cronFields[i], watcher.Clip(f, 40), err)
		}
	}
	parsed, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, watcher.InvalidPredicate("cron", "does not parse: %v", err)
	}
	sched, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, watcher.InvalidPredicate("cron", "must have 5 fields (minute hour day-of-month month day-of-week)")
	}
	wall := *sched
	wall.Location = time.UTC
	if neverFires(&wall) {
		return nil, watcher.InvalidPredicate("cron", "this schedule never fires: no month has the day it names")
	}
	return &wall, nil
}

// starBit marks a cron field given as "*" (robfig/cron's own mark).
const starBit = 1 << 63

// neverFires reports whether no calendar day satisfies the schedule. With
// both day fields restricted a day matches either (so any weekday fires);
// with either a star they must both match, and a day-of-week that is a
// star leaves only day-of-month, which may name no day of any month given
// (the 30th of February).
func neverFires(s *cron.SpecSchedule) bool {
	if s.Dow&starBit == 0 || s.Dom&starBit != 0 {
		return false // some weekday of every month, or every day of it
	}
	daysIn := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if s.Month&(1<<uint(m)) == 0 {
			continue
		}
		for d := 1; d <= daysIn[m]; d++ {
			if s.Dom&(1<<uint(d)) != 0 {
				return false
			}
		}
	}
	return true
}

// NextDue implements engine.NextDuer: the first fire strictly after now,
// or an error saying why there is none to be found: a stored predicate
// that no longer reads (its tz gone from this machine's time zone
// database, a daemon started again elsewhere), or a cron expression with
// no fire within the search (robfig/cron looks five years ahead).
func (w *Watcher) NextDue(predicate json.RawMessage, anchor, now time.Time) (time.Time, error) {
	s, err := w.parse(predicate, storedFloor)
	if err != nil {
		return time.Time{}, fmt.Errorf("its predicate does not read on this daemon: %w", err)
	}
	return s.nextDue(anchor, now)
}

// nextDue returns the first fire of s strictly after now.
func (s *spec) nextDue(anchor, now time.Time) (time.Time, error) {
	if s.every > 0 {
		if now.Before(anchor) {
			return anchor.Add(s.every), nil
		}
		n := now.Sub(anchor)/s.every + 1
		return anchor.Add(n * s.every).UTC(), nil
	}
	if next, ok := s.next(now); ok {
		return next, nil
	}
	return time.Time{}, fmt.Errorf("cron %q has no fire within five years after %s", s.Cron, now.UTC().Format(time.RFC3339))
}

// maxSegments bounds the zone periods (between two offset changes) one
// search crosses: a rare calendar (the 29th of February) crosses a few
// years of them.
const maxSegments = 64

// next returns the first fire of a cron schedule strictly after now. The
// schedule gives wall-clock times; within one period of the zone (one UTC
// offset) they map onto instants one to one, and at an offset change:
//
//   - the clock springs forward over a gap: a fixed-time job due in the
//     gap runs at its end, the change itself; a wildcard job skips it;
//   - the clock falls back over a repeat: a wildcard job runs again at the
//     repeated times; a fixed-time job, which ran the first time round,
//     does not.
func (s *spec) next(now time.Time) (time.Time, bool) {
	t := now.In(s.loc)
	_, off := t.Zone()
	low := wallOf(t, off) // wall times after low are due
	if start, _ := t.ZoneBounds(); s.fixed && !start.IsZero() {
		// Asked inside a repeated hour: its times were due the first time round.
		if _, before := start.Add(-time.Nanosecond).Zone(); before > off {
			low = later(low, wallOf(start, before).Add(-time.Second))
		}
	}
	for range maxSegments {
		_, end := t.ZoneBounds()
		cand := s.sched.Next(low)
		if cand.IsZero() {
			return time.Time{}, false
		}
		at := cand.Add(-time.Duration(off) * time.Second)
		if end.IsZero() || at.Before(end) {
			return at.UTC(), true
		}
		// The period ends before the candidate: cross the change at end.
		_, after := end.Zone()
		if s.fixed && after > off {
			gapFrom, gapTo := wallOf(end, off), wallOf(end, after)
			if c := s.sched.Next(gapFrom.Add(-time.Second)); !c.IsZero() && c.Before(gapTo) {
				return end.UTC(), true
			}
		}
		low = wallOf(end, after).Add(-time.Second)
		if s.fixed && after < off {
			low = later(low, wallOf(end, off).Add(-time.Second))
		}
		t, off = end, after
	}
	return time.Time{}, false
}

// wallOf returns the wall-clock time of t at offset off (seconds east of
// UTC), spelled as a UTC time.
func wallOf(t time.Time, off int) time.Time {
	return t.UTC().Add(time.Duration(off) * time.Second)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Admit refuses every schedule watch unless exec is allowed.
func (w *Watcher) Admit(context.Context, json.RawMessage) error {
	if !w.allowExec {
		return watcher.Unobservable("schedule watches run programs: start the daemon with --allow-exec (VIGIL_ALLOW_EXEC=1)")
	}
	return nil
}

// Probe runs the program once: one fire. Whatever happens is a note.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindSchedule); err != nil {
		return vigil.Observation{}, err
	}
	if !w.allowExec {
		return vigil.Observation{}, watcher.Permanent(errors.New("schedule watches run programs and exec is not allowed on this daemon"))
	}
	s, err := w.parse(p.Predicate, storedFloor)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored schedule predicate is invalid: %w", err))
	}
	prog := s.Program
	env := make(map[string]string, len(prog.Env)+1)
	for k, v := range prog.Env {
		env[k] = v
	}
	env["VIGIL_CHAIN_DEPTH"] = strconv.Itoa(p.ChainDepth + 1)
	prog.Env = env
	out, err := w.runner.Run(ctx, prog, nil, s.timeout)
	if ctx.Err() != nil {
		// Shutting down: not a fire.
		return vigil.Observation{}, ctx.Err()
	}
	if err != nil {
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: watcher.Clip("failed: could not run: "+err.Error(), 512),
			Facts: map[string]any{"error": watcher.Clip(err.Error(), 512)}}, nil
	}
	facts := map[string]any{}
	if out.Stdout != "" {
		facts["stdout"] = watcher.ClipTail(out.Stdout, proc.FactTail)
	}
	if out.Stderr != "" {
		facts["stderr"] = watcher.ClipTail(out.Stderr, proc.FactTail)
	}
	var head string
	switch {
	case out.Ended != "":
		head = "failed: " + out.Ended
		facts["ended"] = out.Ended
	case out.ExitCode != 0:
		head = fmt.Sprintf("failed: exited %d", out.ExitCode)
		facts["exit_code"] = out.ExitCode
	default:
		head = "exited 0"
		facts["exit_code"] = 0
	}
	text := strings.TrimSpace(out.Stdout)
	if text == "" || out.ExitCode != 0 || out.Ended != "" {
		text = strings.TrimSpace(strings.TrimSpace(out.Stdout) + "\n" + strings.TrimSpace(out.Stderr))
	}
	summary := head
	if text != "" {
		summary += "; output: " + watcher.ClipTail(text, noteOutput)
	}
	return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: summary, Facts: facts}, nil
}
