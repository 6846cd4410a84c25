package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
)

// freezeRecord is one freeze (-freezes): of which daemon, from its SIGSTOP
// to its SIGCONT.
type freezeRecord struct {
	replica     int
	at, thawed  time.Time
	lost, taken int // its "shards lost" lines after it; the others' "shards taken" lines during it
	// ready is how long after the SIGCONT its /readyz answered 200
	// again; -1: not within 30 s (and -partition-for, with -partitions).
	ready time.Duration
	// othersUnready names the other daemons not ready in three probes
	// 5 s before the SIGCONT, with what they answered.
	othersUnready []string
}

// freezeAtRandom freezes one daemon drawn at random h.freezes times
// (SIGSTOP, then SIGCONT h.freezeFor later: a long GC pause, a VM paused
// or migrated), at instants drawn across the middle eight tenths of the
// spread from t0, the next at least 5 s after the last thawed, in a
// goroutine of its own. A daemon cut off from the database, or not
// running (killed, restarting), is not drawn. Its lease session goes idle
// and the server ends it after the lease; the others take its shards,
// and once thawed it must find them lost, its writes refused by the fence.
// The channel it returns yields nil once the last is thawed.
func (h *harness) freezeAtRandom(t0 time.Time) <-chan error {
	at := h.instants(t0, h.freezes)
	draw := make([]int, h.freezes)
	for k := range draw {
		draw[k] = h.rnd.IntN(h.replicas)
	}
	done := make(chan error, 1)
	go func() {
		var thawed time.Time
		for k, t := range at {
			sleepUntil(t)
			sleepUntil(thawed.Add(5 * time.Second))
			i := -1
			for j := range h.replicas {
				if c := (draw[k] + j) % h.replicas; !h.cutOff(c) && h.signal(c, syscall.SIGSTOP) {
					i = c
					break
				}
			}
			if i < 0 {
				continue // every daemon cut off or restarting: none frozen
			}
			rec := freezeRecord{replica: i, at: time.Now()}
			h.frozen.Store(int64(i))
			fmt.Fprintf(h.logf, "--- SIGSTOP of daemon %d at %s\n", i, vigil.FormatTime(rec.at))
			thawAt := rec.at.Add(h.freezeFor)
			sleepUntil(thawAt.Add(-5 * time.Second))
			rec.othersUnready = h.unreadyOthers(func(j int) bool { return j == i || h.cutOff(j) })
			sleepUntil(thawAt)
			h.signal(i, syscall.SIGCONT)
			h.frozen.Store(-1)
			rec.thawed = time.Now()
			thawed = rec.thawed
			fmt.Fprintf(h.logf, "--- SIGCONT of daemon %d at %s\n", i, vigil.FormatTime(rec.thawed))
			// Within 30 s, and a partition of every daemon (which may
			// begin as it thaws) longer.
			until := rec.thawed.Add(30 * time.Second)
			if h.partitions > 0 {
				until = until.Add(h.partitionFor)
			}
			rec.ready, _ = h.readyWithin(i, true, until, rec.thawed)
			h.hookMu.Lock()
			h.freezeLog = append(h.freezeLog, rec)
			h.hookMu.Unlock()
		}
		done <- nil
	}()
	return done
}

// signal sends sig to daemon i's process, if it runs, and reports whether
// it did.
func (h *harness) signal(i int, sig syscall.Signal) bool {
	h.procMu.Lock()
	defer h.procMu.Unlock()
	p := h.procs[i]
	return p != nil && p.Process.Signal(sig) == nil
}

// isFrozen reports whether daemon i is frozen now.
func (h *harness) isFrozen(i int) bool { return h.frozen.Load() == int64(i) }

// freezesLanded prints what each freeze did, from the daemons' log, and
// counts as violations: a daemon not ready again within 30 s of its
// SIGCONT (and -partition-for, with -partitions), another daemon not
// ready during it, and freezes longer than the lease none of whose daemons
// then logged the loss of its shards.
func (h *harness) freezesLanded(lease time.Duration, bad func(string, ...any)) error {
	if len(h.freezeLog) == 0 {
		return nil
	}
	lines, err := logLines(filepath.Join(h.dir, "daemon.log"))
	if err != nil {
		return err
	}
	lapsed := 0
	for k := range h.freezeLog {
		rec := &h.freezeLog[k]
		me := fmt.Sprintf("replica=crash-%d ", rec.replica)
		var next time.Time
		if k+1 < len(h.freezeLog) {
			next = h.freezeLog[k+1].at
		}
		rec.lost, rec.taken = shardMoves(lines, func(text string) bool { return strings.Contains(text, me) }, rec.at, rec.thawed, next)
		if rec.lost > 0 {
			lapsed++
		}
		fmt.Printf("freeze %d: daemon %d stopped for %v; ready again %s after its SIGCONT; then %d losses of shards logged, %d takings by the others meanwhile\n",
			k+1, rec.replica, rec.thawed.Sub(rec.at).Round(100*time.Millisecond), delay(rec.ready), rec.lost, rec.taken)
		if rec.ready < 0 {
			bad("freeze %d: daemon %d's /readyz did not answer 200 within 30 s of its SIGCONT (and a partition, with -partitions)", k+1, rec.replica)
		}
		if len(rec.othersUnready) > 0 {
			bad("freeze %d: %s, not frozen, not ready during it", k+1, strings.Join(rec.othersUnready, ", "))
		}
	}
	if h.freezeFor > lease && lapsed == 0 {
		bad("none of the %d freezes, each longer than the lease (%v), made its daemon lose its shards", len(h.freezeLog), lease)
	}
	return nil
}
