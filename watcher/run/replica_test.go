package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
)

// replicaRun is a run watch on a store shared by replicas, and how each
// replica (its own run directory) probes it.
type replicaRun struct {
	t     *testing.T
	st    *memstore.Store
	canon json.RawMessage
	count string // the program appends a line to it each time it runs
}

const replicaWatch = "01REPLICARUN"

func newReplicaRun(t *testing.T) *replicaRun {
	t.Helper()
	r := &replicaRun{t: t, st: memstore.New(), count: filepath.Join(t.TempDir(), "count")}
	c, err := run.New(testConfig(t, t.TempDir(), nil, nil)).Canonicalize(t.Context(), json.RawMessage(`{"shell":"echo ran >> `+r.count+`"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.canon = c.Predicate
	if _, err := r.st.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: &vigil.Watch{ID: replicaWatch, Kind: vigil.KindRun,
		Predicate: c.Predicate, Recipient: "r", State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 30 * time.Second,
		Deadline: time.Now().Add(time.Hour), CreatedAt: time.Now(), Identity: replicaWatch}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// replica is the run watcher of one replica, as the daemon wires it on a
// store with replicas, with its own run directory.
func (r *replicaRun) replica(name string) (*run.Watcher, string) {
	dir := r.t.TempDir()
	c := testConfig(r.t, dir, nil, nil)
	c.StartFunc, c.Replica = run.StoreStart(r.st, true), name
	return run.New(c), dir
}

// probe probes the watch on w with last as the observation its probe read.
func (r *replicaRun) probe(w *run.Watcher, last *vigil.Observation) (vigil.Observation, error) {
	return w.Probe(context.Background(), watcher.Probe{WatchID: replicaWatch, Kind: vigil.KindRun, Predicate: r.canon, Now: time.Now(), Last: last})
}

func (r *replicaRun) last() *vigil.Observation {
	r.t.Helper()
	w, err := r.st.WatchGet(context.Background(), replicaWatch)
	if err != nil {
		r.t.Fatal(err)
	}
	return w.LastObservation
}

// recordStart records replica's start of the run, as its StartFunc does
// before the program starts.
func (r *replicaRun) recordStart(replica string) {
	r.t.Helper()
	obs := run.Starting(replica, time.Now())
	if ok, err := r.st.WatchObserve(context.Background(), vigil.WatchObserveParams{ID: replicaWatch, Observation: &obs, CheckBaseline: true}); err != nil || !ok {
		r.t.Fatalf("recording %s's start = %v, %v", replica, ok, err)
	}
}

// runs is how many times the program ran, once every start has ended.
func (r *replicaRun) runs() int {
	b, err := os.ReadFile(r.count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "ran\n")
}

// TestStartRecordedBeforeItIsMade: on replicas the start of a run is
// recorded, fenced, before the program starts, so a replica that takes the
// watch's shard the moment after finds it started (and does not start it
// again), whether or not the observation of the running program was
// written.
func TestStartRecordedBeforeItIsMade(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	a, dirA := r.replica("replica-a")
	obs, err := r.probe(a, nil)
	if err != nil || !strings.HasPrefix(obs.Summary, "running") {
		t.Fatalf("first probe on replica a = %+v, %v; want running", obs, err)
	}
	rec := r.last()
	if rec == nil || rec.Verdict != vigil.VerdictPending || rec.Facts["starting_on"] != "replica-a" {
		t.Fatalf("stored before the program started: %+v; want replica a's start", rec)
	}
	waitFile(filepath.Join(dirA, replicaWatch+".json"))
	// The shard moves to replica b before replica a wrote "running".
	r.notStartedBy(rec)
	if n := r.runs(); n != 1 {
		t.Fatalf("the program ran %d times, want once", n)
	}
}

// TestNotStartedOverAnotherStart: a probe read the watch with nothing
// recorded, and meanwhile a replica that held its shard recorded its own
// start: this probe starts nothing (its record, made over what it read,
// is refused).
func TestNotStartedOverAnotherStart(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	r.recordStart("replica-b")
	a, dirA := r.replica("replica-a")
	obs, err := r.probe(a, nil) // it read the watch before replica b's record
	if err != nil || !strings.HasPrefix(obs.Summary, "not started") {
		t.Fatalf("replica a's probe = %+v, %v; want not started", obs, err)
	}
	noPidFile(t, dirA, "replica a")
	if n := r.runs(); n != 0 {
		t.Fatalf("the program ran %d times here, want never", n)
	}
	if got := r.last(); got == nil || got.Facts["starting_on"] != "replica-b" {
		t.Fatalf("stored: %+v; want replica b's start kept", got)
	}
}

// TestOwnStartNotMadeIsTriedAgain: a start this replica recorded and never
// made (no pid file here: it failed before it) is tried again here, not
// taken for another replica's.
func TestOwnStartNotMadeIsTriedAgain(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	r.recordStart("replica-a")
	a, dirA := r.replica("replica-a")
	obs, err := r.probe(a, r.last())
	if err != nil || !strings.HasPrefix(obs.Summary, "running") {
		t.Fatalf("replica a's probe after its own start failed = %+v, %v; want running", obs, err)
	}
	waitFile(filepath.Join(dirA, replicaWatch+".json"))
	if n := r.runs(); n != 1 {
		t.Fatalf("the program ran %d times, want once", n)
	}
}

// run probes the watch on w as the engine does (watcher.Run: an error
// becomes an unavailable observation, with the facts the watcher gave; the
// engine's clock reads milliseconds, as stores keep them).
func (r *replicaRun) run(w *run.Watcher, last *vigil.Observation) vigil.Observation {
	r.t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: replicaWatch, Kind: vigil.KindRun, Predicate: r.canon, Now: now, Last: last})
	if err != nil {
		r.t.Fatal(err)
	}
	return obs
}

// record writes obs as the engine writes a probe's observation.
func (r *replicaRun) record(obs *vigil.Observation) {
	r.t.Helper()
	if ok, err := r.st.WatchObserve(context.Background(), vigil.WatchObserveParams{ID: replicaWatch, Observation: obs}); err != nil || !ok {
		r.t.Fatalf("recording %+v = %v, %v", obs, ok, err)
	}
}

// notStartedBy checks that replica b, taking the watch's shard with last
// stored, does not start the run.
func (r *replicaRun) notStartedBy(last *vigil.Observation) {
	r.t.Helper()
	b, dirB := r.replica("replica-b")
	if obs := r.run(b, last); obs.Verdict != vigil.VerdictUnavailable || !obs.Permanent || !strings.Contains(obs.Reason, "another daemon") {
		r.t.Errorf("replica b's probe over %+v = %+v; want the run found started by another daemon", last, obs)
	}
	noPidFile(r.t, dirB, "replica b")
}

// noPidFile checks that who, whose run directory is dir, started no run.
func noPidFile(t *testing.T, dir, who string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, replicaWatch+".pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s made a pid file (%v): it started the run", who, err)
	}
}

// TestStartedRecordSurvivesUnreadableFiles: on replicas, a probe of a run
// recorded as started that cannot read its files for a passing reason
// answers its error, which max_errors counts, and the error's observation
// keeps the record's facts: a replica taking the shard does not start the
// program again, after one error or several in a row. On one daemon the
// error carries no record, as before.
func TestStartedRecordSurvivesUnreadableFiles(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	a, dirA := r.replica("replica-a")
	// The pid path cannot be read as a file: a passing error of the probe.
	if err := os.Mkdir(filepath.Join(dirA, replicaWatch+".pid"), 0o700); err != nil {
		t.Fatal(err)
	}
	last := &vigil.Observation{Verdict: vigil.VerdictPending, Summary: "running (pid 4242)", Facts: map[string]any{"pid": 4242}}
	// max_errors 3 ends the watch at the third error in a row, as on one
	// daemon.
	w := &vigil.Watch{Kind: vigil.KindRun, Mode: vigil.ModeUntil, MaxErrors: 3}
	var prog vigil.Progress
	for i := range 3 {
		obs := r.run(a, last)
		if obs.Verdict != vigil.VerdictUnavailable || obs.Permanent || obs.Facts["pid"] != 4242 || obs.Facts["started"] != true {
			t.Fatalf("probe %d of a started run whose files cannot be read = %+v; want a passing error that keeps the record", i+1, obs)
		}
		r.notStartedBy(&obs)
		prog = prog.Advance(obs.Verdict, obs.At)
		d := vigil.Decide(w, &obs, prog, obs.At, false)
		if settled := i == 2; d.Settle != settled || settled && (d.State != vigil.StateErrored || d.Reason != "max_errors") {
			t.Fatalf("after error %d: %+v; want settled errored by max_errors only at the third", i+1, d)
		}
		last = &obs
	}
	one := run.New(testConfig(t, dirA, nil, nil))
	pending := &vigil.Observation{Verdict: vigil.VerdictPending, Summary: "running (pid 4242)", Facts: map[string]any{"pid": 4242}}
	if obs := r.run(one, pending); obs.Verdict != vigil.VerdictUnavailable || obs.Facts != nil {
		t.Fatalf("on one daemon the probe = %+v; want its error, with no record", obs)
	}
}

// TestFailedStartStaysRecorded: on replicas, a start that fails after it
// was recorded (here the supervisor cannot be started) answers its error,
// counted by max_errors, carrying this replica's start record: the next
// probe here tries again, and a replica that takes the shard does not
// start it.
func TestFailedStartStaysRecorded(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	dir := t.TempDir()
	c := testConfig(t, dir, nil, nil)
	c.StartFunc, c.Replica = run.StoreStart(r.st, true), "replica-a"
	c.SupervisorArgv = []string{filepath.Join(t.TempDir(), "no-such-supervisor")}
	a := run.New(c)
	var last *vigil.Observation
	for i := range 2 {
		obs := r.run(a, last)
		if obs.Verdict != vigil.VerdictUnavailable || obs.Permanent || obs.Facts["starting_on"] != "replica-a" || obs.Facts["started"] != true {
			t.Fatalf("probe %d, whose start failed after it was recorded = %+v; want a passing error carrying replica a's start record", i+1, obs)
		}
		r.notStartedBy(&obs)
		r.record(&obs)
		last = &obs
	}
}

// TestStartThatNeverHappenedChecksAsAFirstStart: on replicas, a pid file
// here of a start that never happened (nobody holds it, no record, no
// status) is started only as a first probe starts a run: not over another
// replica's start, whether this probe read it (the run was started
// elsewhere) or it was recorded after this probe read the watch (the start
// cannot be recorded over it).
func TestStartThatNeverHappenedChecksAsAFirstStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		read    bool // the probe read replica b's start
		summary string
	}{
		{"the probe read the other start", true, ""},
		{"recorded after the probe read the watch", false, "not started: the watch is no longer pending here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReplicaRun(t)
			r.recordStart("replica-b")
			a, dirA := r.replica("replica-a")
			if err := os.WriteFile(filepath.Join(dirA, replicaWatch+".pid"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			var last *vigil.Observation
			if tt.read {
				last = r.last()
			}
			obs := r.run(a, last)
			if tt.read && (obs.Verdict != vigil.VerdictUnavailable || !obs.Permanent || !strings.Contains(obs.Reason, "another daemon")) {
				t.Errorf("replica a's probe over replica b's start = %+v; want the run found started by another daemon", obs)
			}
			if !tt.read && (obs.Verdict != vigil.VerdictPending || obs.Summary != tt.summary) {
				t.Errorf("replica a's probe = %+v; want pending, %q", obs, tt.summary)
			}
			if n := r.runs(); n != 0 {
				t.Errorf("the program ran %d times here, want never", n)
			}
			if got := r.last(); got == nil || got.Facts["starting_on"] != "replica-b" {
				t.Errorf("stored: %+v; want replica b's start kept", got)
			}
		})
	}
}
