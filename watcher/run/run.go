// Package run is the watcher for kind run: a watch that starts a long
// command once and settles when it exits — satisfied on exit 0, failed on
// any other exit, a signal, or an end its supervisor made (even one the
// program answered by exiting 0) — with the exit code, the duration and
// the end of the output.
//
// The predicate spells the program as a command predicate does (exactly
// one of argv or shell, optional cwd and env; see package command), plus
//
//	tail  how many bytes of the end of the output (stdout and stderr
//	      together, as written) the outcome keeps: 65536 by default,
//	      at most 1 MiB
//
// # Supervision
//
// The first probe starts the program under a small supervisor, `vigil
// supervise` (see Supervise), in its own session, so the program outlives
// the daemon: a daemon that is stopped, killed or upgraded finds its runs
// where it left them. The supervisor starts the program in its own process
// group with the environment a command probe would get plus
// VIGIL_CHAIN_DEPTH (the watch's depth + 1), keeps the last tail bytes of
// its output, and when it exits writes a status file atomically (a
// temporary file, fsync, rename) in the run directory, <data_dir>/run:
//
//	<watch id>.pid   made by the daemon before the start, locked (flock)
//	                 before its name appears, and never made twice, so a
//	                 run starts at most once; the supervisor inherits it,
//	                 the lock with it, holds it for its whole life and
//	                 writes its pid into it (on disk before the program
//	                 starts), then the program's
//	<watch id>.json  the status: exit code or signal, start and end, the tail
//
// A probe reads these and nothing else: the status file answers; a held
// lock is a run still going (pending); a pid file that nobody locks and no
// status is a supervisor that died without a word, which settles the watch
// errored, unless no supervisor ever wrote into it: then its daemon died
// before one took it, the run never started, and the probe removes the
// file and starts the run as a first probe does.
//
// # Waking up
//
// Completion is event-driven: Run, one goroutine per daemon, watches the
// run directory (fsnotify) and calls Config.PokeFunc with the watch id when
// a status file appears, so the watch is probed at once. At start it pokes
// every status file already there (runs that ended while the daemon was
// down). The kind's interval (30 s by default, Descriptor) is only a
// fallback for a lost notification or a supervisor that died; probing is a
// stat and an flock, and writes nothing while nothing changes.
//
// # Deadline
//
// The probe at the deadline (watcher.Probe.Final) ends a run still going:
// it sends SIGTERM to the supervisor, which sends SIGTERM to the program's
// whole process group and SIGKILL after Config.KillGrace, then records
// the status. The watch expires. A run that never started by then is not
// started.
//
// # Replicas
//
// On a PostgreSQL store with several replicas the run directory is each
// replica's own. A watch whose shard moves to another replica (one joined,
// or its holder stopped) is not started again there: the new holder's
// first probe finds no pid file although the watch recorded its run as
// started, and settles it errored (the program goes on, unobserved, where
// it started). The start is recorded (Starting) before the program starts,
// fenced on the replica's lease and only over the observation the probe
// read (Config.StartFunc), so two replicas never both start a run: one
// that could not record its start starts nothing. A run that had not
// started when the shard moved starts on the new holder. A passing error
// of a started run's probe keeps the record (startRecord): it is counted
// by max_errors as on one daemon, and its observation still says the run
// started.
//
// # Files left behind
//
// Status and pid files stay after their watch settles (the answer must
// survive a crash between reading it and committing the settlement); Run
// removes those older than Config.Retention (8 days by default; the
// daemon keeps them a day past its max_deadline when that is longer)
// when it starts.
package run

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
)

// Defaults and bounds.
const (
	// DefaultTail is how many bytes of the end of the output an outcome keeps.
	DefaultTail = 64 << 10
	// MaxTail bounds the tail a predicate may ask for.
	MaxTail = 1 << 20
	// DefaultRetention is how long status and pid files are kept.
	DefaultRetention = 8 * 24 * time.Hour
	// startTimeout bounds how long a probe waits for a supervisor to start.
	startTimeout = 10 * time.Second
	// EnvStage is set by the supervisor to tell its second stage apart.
	EnvStage = "VIGIL_SUPERVISE_STAGE"
)

// Config configures the run watcher.
type Config struct {
	// AllowExec allows run watches (the daemon's --allow-exec).
	AllowExec bool
	// Dir is the run directory, <data_dir>/run. Required.
	Dir string
	// SupervisorArgv starts the supervisor; nil means this executable with
	// the argument "supervise" (`vigil supervise`).
	SupervisorArgv []string
	// SupervisorEnv is the supervisor's own environment (the program's is
	// built apart); nil means none.
	SupervisorEnv []string
	// KillGrace is how long a program has between SIGTERM and SIGKILL at
	// the deadline (default proc.DefaultKillGrace).
	KillGrace time.Duration
	// PokeFunc is called with a watch id when its run has ended; the
	// daemon wires it to the scheduler's Poke. Nil means nobody is told,
	// and the kind's interval finds it.
	PokeFunc func(id string)
	// Retention is how long status files are kept (default DefaultRetention).
	Retention time.Duration
	// StartFunc is asked just before a first probe starts the program,
	// once the start is registered (so that Stop finds it) and before
	// anything is made, and reports whether the program may start. last
	// is the watch's last observation as the probe read it, starting the
	// observation that records the start (Starting). The daemon answers
	// false for a watch no longer pending, so that a watch cancelled after
	// the scheduler read it as pending never starts its program (a cancel
	// committed before the question is answered here, one committed after
	// it finds the start registered). On a store with replicas it first
	// records starting, fenced on this replica's lease and only over last
	// (vigil.WatchObserveParams.CheckBaseline), and answers false if it
	// could not: a replica that takes the watch's shard afterwards finds
	// the run started and does not start it again, and one that held the
	// shard meanwhile and recorded its own start leaves nothing to start
	// here. Nil asks nobody.
	StartFunc func(ctx context.Context, id string, last, starting *vigil.Observation) (bool, error)
	// Replica is this daemon's replica id on a store with replicas ("" on
	// one daemon). It is a fact of the start's record (Starting), so that a
	// start this replica recorded but never made (it failed before its pid
	// file) is tried again here, not taken for another replica's.
	Replica string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Watcher answers run watches.
type Watcher struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// starting holds the watches whose supervisor is being started, each
	// true once Stop asked for it meanwhile: start ends it once it is up.
	starting map[string]bool
}

var (
	_ watcher.Watcher     = (*Watcher)(nil)
	_ watcher.Stopper     = (*Watcher)(nil)
	_ watcher.FinalProber = (*Watcher)(nil)
)

// FinalProbe implements watcher.FinalProber: the probe at the deadline
// ends a run still going (and reads an exit that came just before it),
// so it runs even after a probe that was running as the deadline came.
func (*Watcher) FinalProbe() {}

// New returns a run watcher.
func New(cfg Config) *Watcher {
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = proc.DefaultKillGrace
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PokeFunc == nil {
		cfg.PokeFunc = func(string) {}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, log: log.With("component", "run"), starting: make(map[string]bool)}
}

// Stop implements watcher.Stopper: a run watch that was cancelled (by its
// caller, its recipient closing or its token's revocation) has its program
// ended as at its deadline: the supervisor signals the process group with
// SIGTERM, then SIGKILL after the grace, and records the end. A run that is
// being started is ended as soon as it is up; one that never started or has
// ended is left alone.
func (w *Watcher) Stop(_ context.Context, id string) error {
	if !validID(id) {
		return nil
	}
	w.mu.Lock()
	if _, ok := w.starting[id]; ok {
		w.starting[id] = true
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	_, err := w.terminate(id)
	return err
}

// terminate asks the supervisor of id's run, if it is still running, to
// end its program, and returns the record of the run it found.
func (w *Watcher) terminate(id string) (pidRecord, error) {
	var pr pidRecord
	rec, err := os.ReadFile(w.pidPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return pr, nil
	}
	if err != nil {
		return pr, err
	}
	_ = json.Unmarshal(rec, &pr)
	alive, err := locked(w.pidPath(id))
	if err != nil || !alive || pr.Supervisor <= 0 {
		return pr, err
	}
	return pr, terminate(pr.Supervisor)
}

type input struct {
	proc.Program
	Tail *int `json:"tail,omitempty"`
}

type canonical struct {
	proc.Program
	Tail int `json:"tail"`
}

// Kind returns vigil.KindRun.
func (*Watcher) Kind() vigil.Kind { return vigil.KindRun }

// Canonicalize validates the predicate and returns its canonical form.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	c, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(c)
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

func parse(raw json.RawMessage) (*canonical, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	if err := in.Program.Check(""); err != nil {
		return nil, err
	}
	c := &canonical{Program: in.Program, Tail: DefaultTail}
	if in.Tail != nil {
		if *in.Tail < 0 || *in.Tail > MaxTail {
			return nil, watcher.InvalidPredicate("tail", "must be a number of bytes from 0 to %d", MaxTail)
		}
		c.Tail = *in.Tail
	}
	return c, nil
}

// Admit refuses every run watch unless exec is allowed.
func (w *Watcher) Admit(context.Context, json.RawMessage) error {
	if !w.cfg.AllowExec {
		return watcher.Unobservable("run watches run programs: start the daemon with --allow-exec (VIGIL_ALLOW_EXEC=1)")
	}
	return nil
}

// Status is what a supervisor records when its program ends.
type Status struct {
	WatchID   string    `json:"watch_id"`
	Pid       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	// ExitCode is set when the program exited by itself.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that ended it, if one did.
	Signal string `json:"signal,omitempty"`
	// Terminated is set when the supervisor ended it (the deadline, a
	// cancel, a SIGTERM sent to the supervisor), whatever the exit.
	Terminated bool `json:"terminated,omitempty"`
	// Error says why the program could not be started.
	Error string `json:"error,omitempty"`
	// Tail is the end of the output; OutputBytes counts all of it.
	Tail        string `json:"tail"`
	OutputBytes int64  `json:"output_bytes"`
}

// pidRecord is what a supervisor writes into the pid file it locks.
type pidRecord struct {
	Supervisor int       `json:"supervisor"`
	Pid        int       `json:"pid"`
	StartedAt  time.Time `json:"started_at"`
}

func (w *Watcher) pidPath(id string) string    { return filepath.Join(w.cfg.Dir, id+".pid") }
func (w *Watcher) statusPath(id string) string { return filepath.Join(w.cfg.Dir, id+".json") }

// Probe answers from the run's files, and starts the run on the first
// probe; see the package comment.
//
// On replicas (Config.Replica) a run recorded as started stays recorded
// so: a probe that cannot read its files for a passing reason answers its
// error, which max_errors counts as on one daemon, with the record's facts
// and the started fact (see startRecord). Without them the error's
// unavailable observation would replace the record, and a replica that
// took the watch's shard then would find nothing started and start the
// program again.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	obs, err := w.probe(ctx, p)
	if err != nil && w.cfg.Replica != "" && !watcher.IsPermanent(err) {
		if facts, ok := startRecord(p.Last); ok {
			return vigil.Observation{Facts: facts}, err
		}
	}
	return obs, err
}

func (w *Watcher) probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindRun); err != nil {
		return vigil.Observation{}, err
	}
	if !w.cfg.AllowExec {
		return vigil.Observation{}, watcher.Permanent(errors.New("run watches run programs and exec is not allowed on this daemon"))
	}
	c, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored run predicate is invalid: %w", err))
	}
	if !validID(p.WatchID) {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("watch id %q cannot name a file", p.WatchID))
	}
	if st, ok, err := w.readStatus(p.WatchID); err != nil || ok {
		if err != nil {
			return vigil.Observation{}, err
		}
		return answer(st, c.Tail)
	}
	rec, err := os.ReadFile(w.pidPath(p.WatchID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return w.first(ctx, p, c)
	case err != nil:
		return vigil.Observation{}, err
	}
	var pr pidRecord
	_ = json.Unmarshal(rec, &pr)
	alive, err := locked(w.pidPath(p.WatchID))
	if err != nil {
		return vigil.Observation{}, err
	}
	if alive && pr.Pid == 0 {
		// A supervisor holds the run but has not started the program yet
		// (a start the daemon gave up on while its second stage was up).
		if p.Final {
			_, _ = w.terminate(p.WatchID)
			return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "still starting at the deadline; its supervisor was terminated"}, nil
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "starting"}, nil
	}
	if !alive {
		// The supervisor may have written its status just before exiting.
		if st, ok, err := w.readStatus(p.WatchID); err != nil || ok {
			if err != nil {
				return vigil.Observation{}, err
			}
			return answer(st, c.Tail)
		}
		if unstarted(rec) {
			// No supervisor wrote into it: the daemon that made it died
			// before one took it, and the run never started.
			gone, err := w.reclaim(p.WatchID)
			if err != nil {
				return vigil.Observation{}, err
			}
			if !gone {
				return vigil.Observation{}, errors.New("the run's pid file changed while it was read")
			}
			return w.first(ctx, p, c)
		}
		return vigil.Observation{}, watcher.Permanent(errors.New("the run's supervisor ended without recording an exit status"))
	}
	facts := map[string]any{"pid": pr.Pid}
	if p.Final {
		_, _ = w.terminate(p.WatchID)
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: fmt.Sprintf("still running at the deadline (pid %d); its process group was terminated", pr.Pid), Facts: facts}, nil
	}
	return vigil.Observation{Verdict: vigil.VerdictPending, Summary: fmt.Sprintf("running (pid %d)", pr.Pid), Facts: facts}, nil
}

// first answers a probe that finds no pid file: the run has not started
// here. It starts it, unless the deadline has come or the watch says the
// run started elsewhere.
func (w *Watcher) first(ctx context.Context, p watcher.Probe, c *canonical) (vigil.Observation, error) {
	if p.Final {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "never started"}, nil
	}
	if w.startedElsewhere(p.Last) {
		return vigil.Observation{}, watcher.Permanent(errStartedElsewhere)
	}
	return w.start(ctx, p, c)
}

// unstarted reports whether rec, a pid file's content, names neither a
// supervisor nor a program: no supervisor wrote into it, and a supervisor
// writes its record (and syncs it) before it starts the program.
func unstarted(rec []byte) bool {
	if len(rec) == 0 {
		return true
	}
	var pr pidRecord
	return json.Unmarshal(rec, &pr) == nil && pr.Supervisor <= 0 && pr.Pid <= 0
}

// reclaim removes id's pid file if it is still that of a start that never
// happened: nobody holds it, it names no supervisor (unstarted) and there
// is no status. It looks and removes under the file's lock, and only if
// the path still names the file it locked: a pid file is locked before
// its name appears (makePidFile), so a start being made, or one made
// meanwhile, is never taken for a start that never happened, and of two
// probes that both find the file let go, one removes it.
func (w *Watcher) reclaim(id string) (bool, error) {
	path := w.pidPath(id)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close() // after the removal: the lock goes with it
	if ok, err := tryLock(f); err != nil || !ok {
		return false, err
	}
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	named, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil || !os.SameFile(held, named) {
		return false, err
	}
	rec, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil || !unstarted(rec) {
		return false, err
	}
	if _, ok, err := w.readStatus(id); err != nil || ok {
		return false, err
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return true, nil
}

// errStartedElsewhere settles a run whose start this daemon has no record
// of although the watch recorded it as started.
var errStartedElsewhere = errors.New("the run was started by another daemon (the replica that held the watch's shard before it moved here) " +
	"or its run directory was lost: its process and exit status cannot be seen here, and it is not started a second time")

// startedElsewhere reports whether the last recorded observation says the
// run started ("starting", "running"): only a run that has a pid file
// answers pending before its deadline. With no pid file here, the run
// belongs to another run directory: a replica of a PostgreSQL store that
// held the watch's shard before it moved to this one. Starting it again
// would run the program twice. A start this replica recorded itself
// (Starting) and never made, as there is no pid file, is not another's.
func (w *Watcher) startedElsewhere(last *vigil.Observation) bool {
	if _, ok := startRecord(last); !ok {
		return false
	}
	by, _ := last.Facts[factReplica].(string)
	return w.cfg.Replica == "" || by != w.cfg.Replica
}

// factReplica is the fact of a start's record (Starting) that names the
// replica that recorded it.
const factReplica = "starting_on"

// factStarted is the fact that keeps a run's start recorded through an
// error: on replicas, the unavailable observation of a probe of a started
// run carries it, with the facts of the record it replaces.
const factStarted = "started"

// startRecord reports whether last records the run as started: a pending
// observation (only a run with a pid file, or a start recorded before it
// was made, answers pending before its deadline), or an error's that
// carries factStarted. It returns the facts an error's observation
// carries to keep the record: last's, and factStarted.
func startRecord(last *vigil.Observation) (map[string]any, bool) {
	if last == nil {
		return nil, false
	}
	switch last.Verdict {
	case vigil.VerdictPending:
	case vigil.VerdictUnavailable:
		if started, _ := last.Facts[factStarted].(bool); !started {
			return nil, false
		}
	default:
		return nil, false
	}
	facts := make(map[string]any, len(last.Facts)+1)
	maps.Copy(facts, last.Facts)
	facts[factStarted] = true
	return facts, true
}

// Starting is the observation that records, before the program starts,
// that replica is starting the run (see Config.StartFunc).
func Starting(replica string, at time.Time) vigil.Observation {
	return vigil.Observation{Verdict: vigil.VerdictPending, At: at, Summary: "starting on replica " + cmp.Or(replica, "(one daemon)"),
		Facts: map[string]any{factReplica: replica}}
}

// StoreStart answers Config.StartFunc from st, as the daemon does: a watch
// that is gone or no longer pending may not start. With replicas the start
// is recorded first, fenced on this replica's lease (the store's fence)
// and only over the observation the probe read, and a start that could not
// be recorded does not happen: the watch's shard moved (the fence refused
// the write), or a replica that held it meanwhile recorded its own start
// (vigil.ErrBaselineMoved).
func StoreStart(st vigil.Store, replicas bool) func(context.Context, string, *vigil.Observation, *vigil.Observation) (bool, error) {
	return func(ctx context.Context, id string, last, starting *vigil.Observation) (bool, error) {
		w, err := st.WatchGet(ctx, id)
		if errors.Is(err, vigil.ErrNotFound) {
			return false, nil
		}
		if err != nil || w.State != vigil.StatePending {
			return false, err
		}
		if !replicas {
			return true, nil
		}
		ok, err := st.WatchObserve(ctx, vigil.WatchObserveParams{ID: id, Observation: starting, Polls: w.Polls,
			Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors, Baseline: last, CheckBaseline: true})
		if errors.Is(err, vigil.ErrBaselineMoved) {
			return false, nil
		}
		return ok, err
	}
}

// Recorded returns the answer the run's status file holds when its
// program ended by itself by deadline (engine.Recorder): a daemon started
// after the deadline settles the watch by it, as the final probe would
// have, rather than expiring a run whose exit it was told of in time. A
// run still going, ended by vigil, that could not start, or that ended
// after the deadline has no such answer: the watch expires.
func (w *Watcher) Recorded(p watcher.Probe, deadline time.Time) (vigil.Observation, bool) {
	if p.Kind != vigil.KindRun || !validID(p.WatchID) {
		return vigil.Observation{}, false
	}
	c, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, false
	}
	st, ok, err := w.readStatus(p.WatchID)
	if err != nil || !ok || st.Error != "" || st.Terminated || st.EndedAt.IsZero() || st.EndedAt.After(deadline) {
		return vigil.Observation{}, false
	}
	obs, err := answer(st, c.Tail)
	if err != nil {
		return vigil.Observation{}, false
	}
	return obs, true
}

// answer turns a status into an observation.
func answer(st Status, tail int) (vigil.Observation, error) {
	if st.Error != "" {
		return vigil.Observation{}, watcher.Permanent(errors.New(st.Error))
	}
	d := st.EndedAt.Sub(st.StartedAt)
	facts := map[string]any{
		"duration":     vigil.FormatDuration(d.Round(time.Millisecond)),
		"duration_ms":  d.Milliseconds(),
		"output_bytes": st.OutputBytes,
		"pid":          st.Pid,
	}
	if st.Tail != "" && tail > 0 {
		facts["tail"] = watcher.ClipTail(st.Tail, tail)
	}
	dur := vigil.FormatDuration(d.Round(100 * time.Millisecond))
	switch {
	case st.ExitCode != nil && st.Terminated:
		// Ended by its supervisor (the deadline, a cancel, a SIGTERM sent
		// to the supervisor): an exit 0 in answer to it is not the program
		// finishing.
		facts["exit_code"] = *st.ExitCode
		facts["terminated"] = true
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: fmt.Sprintf("terminated (it exited %d on SIGTERM) after %s", *st.ExitCode, dur), Facts: facts}, nil
	case st.ExitCode != nil && *st.ExitCode == 0:
		facts["exit_code"] = 0
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0 after " + dur, Facts: facts}, nil
	case st.ExitCode != nil:
		facts["exit_code"] = *st.ExitCode
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: fmt.Sprintf("exited %d after %s", *st.ExitCode, dur), Facts: facts}, nil
	}
	if st.Signal == "" && st.Terminated {
		facts["terminated"] = true
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "terminated before it started", Facts: facts}, nil
	}
	if st.Signal == "" {
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "ended without an exit code after " + dur, Facts: facts}, nil
	}
	facts["signal"] = st.Signal
	summary := fmt.Sprintf("killed by %s after %s", st.Signal, dur)
	if st.Terminated {
		facts["terminated"] = true
		summary = fmt.Sprintf("terminated by vigil (%s) after %s", st.Signal, dur)
	}
	return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: summary, Facts: facts}, nil
}

func (w *Watcher) readStatus(id string) (Status, bool, error) {
	b, err := os.ReadFile(w.statusPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, err
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return Status{}, false, watcher.Permanent(fmt.Errorf("the run's status file does not parse: %w", err))
	}
	return st, true, nil
}

// job is what the daemon hands a supervisor on its stdin.
type job struct {
	WatchID string   `json:"watch_id"`
	Dir     string   `json:"dir"`
	Path    string   `json:"path"`
	Argv    []string `json:"argv"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env"`
	Tail    int      `json:"tail"`
	GraceMS int64    `json:"grace_ms"`
	// Locked says the pid file comes open and locked: fd 3 of the first
	// stage, which hands it on as fd 4 of the second (fd 3 is its report).
	// Without it (a daemon from before) the second stage opens the file by
	// its path and locks it itself.
	Locked bool `json:"locked,omitempty"`
}

// start makes the pid file (at most one start per watch, ever) and starts
// the supervisor, waiting until it has taken the lock and started the
// program.
func (w *Watcher) start(ctx context.Context, p watcher.Probe, c *canonical) (obs vigil.Observation, err error) {
	id, depth := p.WatchID, p.ChainDepth
	recorded := false
	defer func() {
		if recorded && err != nil && !watcher.IsPermanent(err) {
			// The start is recorded as this replica's (StartFunc): the
			// error (counted by max_errors) carries the record, the start
			// is tried again here at the next probe, and a replica that
			// takes the shard meanwhile does not start it (a supervisor may
			// be up even so: a start given up on after it came up).
			starting := Starting(w.cfg.Replica, p.Now)
			obs.Facts, _ = startRecord(&starting)
		}
	}()
	prog := c.Program
	env := make(map[string]string, len(prog.Env)+1)
	for k, v := range prog.Env {
		env[k] = v
	}
	env["VIGIL_CHAIN_DEPTH"] = strconv.Itoa(depth + 1)
	prog.Env = env
	path, argv, penv, err := proc.Resolve(prog)
	if err != nil {
		return vigil.Observation{}, err
	}
	if err := os.MkdirAll(w.cfg.Dir, 0o700); err != nil {
		return vigil.Observation{}, err
	}
	w.mu.Lock()
	w.starting[id] = false
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		stop := w.starting[id]
		delete(w.starting, id)
		w.mu.Unlock()
		if stop {
			// Cancelled while it started: the supervisor has written its
			// record and handles SIGTERM before it says it is ready.
			_, _ = w.terminate(id)
		}
	}()
	if w.cfg.StartFunc != nil {
		starting := Starting(w.cfg.Replica, p.Now)
		ok, err := w.cfg.StartFunc(ctx, id, p.Last, &starting)
		if err != nil {
			return vigil.Observation{}, fmt.Errorf("checking the watch may start: %w", err)
		}
		if !ok {
			return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not started: the watch is no longer pending here"}, nil
		}
		recorded = w.cfg.Replica != ""
	}
	// The pid file appears locked, before anything starts, and the lock is
	// handed down: both stages of the supervisor inherit this open file,
	// and the lock with it, so the run is held without a gap from the
	// moment its pid file is there until the supervisor ends, and judging
	// it by the lock (below, and in every probe) never mistakes a start
	// being made, or a second stage that is up, for nobody.
	f, err := makePidFile(w.cfg.Dir, id)
	if errors.Is(err, fs.ErrExist) {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "starting"}, nil
	}
	if err != nil {
		return vigil.Observation{}, err
	}
	b, _ := json.Marshal(job{WatchID: id, Dir: w.cfg.Dir, Path: path, Argv: argv, Cwd: prog.Cwd, Env: penv, Tail: max(c.Tail, 1),
		GraceMS: w.cfg.KillGrace.Milliseconds(), Locked: true})
	sargv := w.cfg.SupervisorArgv
	if len(sargv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			f.Close()
			os.Remove(w.pidPath(id))
			return vigil.Observation{}, watcher.Permanent(fmt.Errorf("finding the vigil executable for the supervisor: %w", err))
		}
		sargv = []string{exe, "supervise"}
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, sargv[0], sargv[1:]...)
	cmd.Env = w.cfg.SupervisorEnv
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(b)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.ExtraFiles = []*os.File{f}
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	// The first stage has exited: from here the lock is held only by a
	// second stage, if one was started.
	f.Close()
	if err != nil {
		// Nobody supervises: let a later probe try again, unless a
		// supervisor wrote into the pid file (reclaim): a second stage
		// that wrote its record may have started the program before it
		// died, and a later probe settles that, not start it again.
		_, _ = w.reclaim(id)
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		return vigil.Observation{}, fmt.Errorf("starting the supervisor: %s", watcher.Clip(msg, 300))
	}
	pid, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(out.String()), "ready "))
	w.log.Debug("run started", "watch_id", id, "pid", pid)
	return vigil.Observation{Verdict: vigil.VerdictPending, Summary: fmt.Sprintf("running (pid %d)", pid), Facts: map[string]any{"pid": pid}}, nil
}

// makePidFile makes id's pid file in dir, empty and locked, and returns it
// open; an error matching fs.ErrExist says it exists: a run starts at most
// once. The file is made and locked under a temporary name, then linked
// to its own, so nobody ever sees a pid file before it is locked: one
// that nobody holds was let go by all who held it. link fails when the
// name is taken; rename would replace the pid file of a start already
// made, and start the run again.
// link is os.Link; tests replace it to stand for a filesystem without
// hard links.
var link = os.Link

func makePidFile(dir, id string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "."+id+".pid.*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name()) // the pid file keeps its own name
	if err := lock(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := link(f.Name(), filepath.Join(dir, id+".pid")); err != nil {
		f.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		// A filesystem without hard links (vfat, exFAT, some FUSE
		// mounts) cannot make a pid file that appears locked: say so
		// rather than start a run that a probe could start again.
		return nil, watcher.Permanent(fmt.Errorf("making the run's pid file in %s (runs need a filesystem with hard links: ext4, xfs, btrfs, APFS…): %w", dir, err))
	}
	// The name is on disk before anything starts: a supervisor syncs its
	// record into the file before it starts the program, which keeps a
	// start from being taken for none after a crash only if the file can
	// be found by its name then.
	if err := syncDir(dir); err != nil {
		os.Remove(filepath.Join(dir, id+".pid")) // empty, and ours: no start made
		f.Close()
		return nil, fmt.Errorf("syncing the run directory %s: %w", dir, err)
	}
	return f, nil
}

// syncDir fsyncs the directory dir, so the names made in it last a crash;
// tests replace it to see it called.
var syncDir = syncDirOS

func syncDirOS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// validID reports whether id can name files in the run directory.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Run watches the run directory until ctx ends, poking each watch whose
// status file appears; at start it removes files past retention and pokes
// every status already there. Start it once the scheduler is primed. If
// the directory cannot be watched it logs why and returns, leaving the
// kind's interval to find ended runs.
func (w *Watcher) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		if err = fw.Add(w.cfg.Dir); err != nil {
			fw.Close()
		}
	}
	if err != nil {
		w.log.Warn("cannot watch the run directory; ended runs are found at their interval", "dir", w.cfg.Dir, "err", err)
		w.sweep(time.Now())
		return nil
	}
	defer fw.Close()
	w.sweep(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if ev.Op&(fsnotify.Create|fsnotify.Write) == 0 {
				continue
			}
			if id, ok := strings.CutSuffix(filepath.Base(ev.Name), ".json"); ok && validID(id) {
				w.cfg.PokeFunc(id)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.log.Warn("watching the run directory", "err", err)
		}
	}
}

// sweep removes files past retention and pokes every status file left.
func (w *Watcher) sweep(now time.Time) {
	ents, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		w.log.Warn("reading the run directory", "err", err)
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		if now.Sub(info.ModTime()) > w.cfg.Retention {
			if strings.HasSuffix(name, ".pid") {
				if alive, err := locked(filepath.Join(w.cfg.Dir, name)); err != nil || alive {
					continue
				}
			}
			_ = os.Remove(filepath.Join(w.cfg.Dir, name))
			continue
		}
		if id, ok := strings.CutSuffix(name, ".json"); ok && validID(id) {
			w.cfg.PokeFunc(id)
		}
	}
}
