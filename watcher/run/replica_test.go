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
	b, dirB := r.replica("replica-b")
	if _, err := r.probe(b, rec); err == nil || !watcher.IsPermanent(err) || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("replica b's probe = %v; want the run found started by another daemon", err)
	}
	if _, err := os.Stat(filepath.Join(dirB, replicaWatch+".pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("replica b made a pid file (%v): it started the run again", err)
	}
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
	if _, err := os.Stat(filepath.Join(dirA, replicaWatch+".pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("replica a made a pid file (%v)", err)
	}
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

// TestStartedRecordSurvivesUnreadableFiles: on replicas, a probe of a run
// recorded as started that cannot read its files for a passing reason
// answers pending with the record's facts, not an error: the error's
// unavailable observation would replace the record, and a replica taking
// the shard would then start the program again. On one daemon the error
// stands, as before.
func TestStartedRecordSurvivesUnreadableFiles(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	a, dirA := r.replica("replica-a")
	// The pid path cannot be read as a file: a passing error of the probe.
	if err := os.Mkdir(filepath.Join(dirA, replicaWatch+".pid"), 0o700); err != nil {
		t.Fatal(err)
	}
	last := &vigil.Observation{Verdict: vigil.VerdictPending, Summary: "running (pid 4242)", Facts: map[string]any{"pid": 4242}}
	obs, err := r.probe(a, last)
	if err != nil || obs.Verdict != vigil.VerdictPending || obs.Facts["pid"] != 4242 {
		t.Fatalf("probe of a started run whose files cannot be read = %+v, %v; want pending with its facts", obs, err)
	}
	one := run.New(testConfig(t, dirA, nil, nil))
	if _, err := one.Probe(context.Background(), watcher.Probe{WatchID: replicaWatch, Kind: vigil.KindRun, Predicate: r.canon, Now: time.Now(), Last: last}); err == nil {
		t.Fatalf("on one daemon the probe answered without its error")
	}
}

// TestFailedStartStaysRecorded: on replicas, a start that fails after it
// was recorded (here the supervisor cannot be started) answers this
// replica's start record, not an error, so the record is not replaced: the
// next probe here tries again, and a replica that takes the shard does not
// start it.
func TestFailedStartStaysRecorded(t *testing.T) {
	t.Parallel()
	r := newReplicaRun(t)
	dir := t.TempDir()
	c := testConfig(t, dir, nil, nil)
	c.StartFunc, c.Replica = run.StoreStart(r.st, true), "replica-a"
	c.SupervisorArgv = []string{filepath.Join(t.TempDir(), "no-such-supervisor")}
	obs, err := r.probe(run.New(c), nil)
	if err != nil || obs.Verdict != vigil.VerdictPending || obs.Facts["starting_on"] != "replica-a" || !strings.Contains(obs.Summary, "failed") {
		t.Fatalf("probe whose start failed after it was recorded = %+v, %v; want replica a's start record, saying it failed", obs, err)
	}
	b, dirB := r.replica("replica-b")
	if _, err := r.probe(b, &obs); err == nil || !watcher.IsPermanent(err) {
		t.Fatalf("replica b's probe after a's failed start = %v; want the run found started by another daemon", err)
	}
	if _, err := os.Stat(filepath.Join(dirB, replicaWatch+".pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("replica b made a pid file (%v)", err)
	}
}
