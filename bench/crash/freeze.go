package main

import (
	"fmt"
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
	held        int // the shards it held when stopped (-1: it did not say)
	// ready is how long after the SIGCONT its /readyz answered 200
	// again; -1: not within 30 s (and -partition-for, with -partitions).
	ready time.Duration
	// othersUnready names the other daemons not ready in three probes
	// 5 s before the SIGCONT, with what they answered.
	othersUnready []string
}

// freezeAtRandom freezes one daemon h.freezes times (SIGSTOP, then
// SIGCONT h.freezeFor later: a long GC pause, a VM paused or migrated),
// at instants drawn across the middle eight tenths of the spread from t0,
// the next at least 5 s after the last thawed, in a goroutine of its own:
// the daemon drawn at random, or the next after it that holds shards (a
// freeze then has shards to lose). A daemon cut off from the database, or
// not running (killed, restarting), is not frozen, and no freeze begins
// while every daemon is cut off. Its lease session goes idle
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
			// Not while every daemon is cut off, when none could take
			// the frozen one's shards. The one drawn, or the next that
			// holds shards; not one cut off or not running.
			i, held, stopped := -1, -1, false
			h.exclusive(h.allCutOff, func() {
				i, held = h.holder(draw[k], func(c int) bool { return !h.cutOff(c) })
				if stopped = i >= 0 && h.signal(i, syscall.SIGSTOP); stopped {
					h.frozen.Store(int64(i))
				}
			})
			if !stopped {
				continue // every daemon cut off or restarting: none frozen
			}
			rec := freezeRecord{replica: i, held: held, at: time.Now()}
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

// exclusive runs begin, the start of a fault, once busy does not hold
// (5 s after it last held, when it did), under h.faultMu: the start of
// a freeze and that of a partition of every daemon exclude each other,
// so that another daemon can take the shards of one frozen.
func (h *harness) exclusive(busy func() bool, begin func()) {
	for {
		if waitWhile(busy) {
			time.Sleep(5 * time.Second)
		}
		h.faultMu.Lock()
		if !busy() {
			begin()
			h.faultMu.Unlock()
			return
		}
		h.faultMu.Unlock()
	}
}

// allCutOff reports whether every daemon is cut off from the database
// now.
func (h *harness) allCutOff() bool {
	for j := range h.replicas {
		if !h.cutOff(j) {
			return false
		}
	}
	return true
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
// then logged the loss of its shards, among those that held shards when
// stopped and had another daemon there to take them.
func (h *harness) freezesLanded(lines []logLine, lease time.Duration, bad func(string, ...any)) {
	lapsed, checked := 0, 0
	for k := range h.freezeLog {
		rec := &h.freezeLog[k]
		check := rec.held > 0 && !h.othersAway(rec.replica, rec.at, rec.thawed)
		rec.lost, rec.taken = h.shardMoves(lines, rec.replica, rec.at, rec.thawed)
		if check {
			checked++
			if rec.lost > 0 {
				lapsed++
			}
		}
		fmt.Printf("freeze %d: daemon %d, holding %s, stopped for %v; ready again %s after its SIGCONT; then %d losses of shards logged, %d takings by the others meanwhile\n",
			k+1, rec.replica, shardCount(rec.held), rec.thawed.Sub(rec.at).Round(100*time.Millisecond), delay(rec.ready), rec.lost, rec.taken)
		if rec.ready < 0 {
			bad("freeze %d: daemon %d's /readyz did not answer 200 within 30 s of its SIGCONT (and a partition, with -partitions)", k+1, rec.replica)
		}
		if len(rec.othersUnready) > 0 {
			bad("freeze %d: %s, not frozen, not ready during it", k+1, strings.Join(rec.othersUnready, ", "))
		}
	}
	if len(h.freezeLog) > 0 {
		lapseChecked("freezes", len(h.freezeLog), checked, lapsed, h.freezeFor > lease, lease, bad)
	}
}

// lapseChecked counts as a violation faults longer than the lease none of
// whose daemons then logged the loss of its shards, when some could (they
// held shards, and another daemon could take them: checked). It says so
// when none could.
func lapseChecked(name string, n, checked, lapsed int, long bool, lease time.Duration, bad func(string, ...any)) {
	switch {
	case !long:
	case checked == 0:
		fmt.Printf("none of the %d %s could show its daemon losing its shards: none held any as it began, or every other daemon was away meanwhile\n", n, name)
	case lapsed == 0:
		bad("none of the %d %s, each longer than the lease (%v), made its daemon lose its shards (%d of them held shards, another daemon there to take them)", n, name, lease, checked)
	}
}

// shardCount formats a count of shards held: -1 is unknown.
func shardCount(n int) string {
	if n < 0 {
		return "shards unknown"
	}
	return fmt.Sprintf("%d shards", n)
}

// nextFault is when the first partition or freeze after the one that
// began at after began that cut off or froze daemon i (-1: any daemon);
// zero: none did. The losses of shards logged after it are its own.
func (h *harness) nextFault(i int, after time.Time) time.Time {
	var next time.Time
	see := func(who int, at time.Time) {
		if (i < 0 || who < 0 || who == i) && at.After(after) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, p := range h.partitionLog {
		see(p.replica, p.at)
	}
	for _, f := range h.freezeLog {
		see(f.replica, f.at)
	}
	return next
}

// othersAway reports whether, at some moment from start to end, every
// daemon but i was away (cut off from the database or frozen), so that
// none could take i's shards then.
func (h *harness) othersAway(i int, start, end time.Time) bool {
	type span struct {
		who      int // -1: every daemon
		from, to time.Time
	}
	var spans []span
	for _, p := range h.partitionLog {
		spans = append(spans, span{p.replica, p.at, p.healed})
	}
	for _, f := range h.freezeLog {
		spans = append(spans, span{f.replica, f.at, f.thawed})
	}
	awayAt := func(j int, t time.Time) bool {
		for _, s := range spans {
			if (s.who == j || s.who < 0) && !t.Before(s.from) && t.Before(s.to) {
				return true
			}
		}
		return false
	}
	// The others are all away at some moment only if they are at the
	// latest of the moments they went away: the start, or a span's.
	moments := []time.Time{start}
	for _, s := range spans {
		if s.from.After(start) && s.from.Before(end) {
			moments = append(moments, s.from)
		}
	}
	for _, t := range moments {
		all := true
		for j := range h.replicas {
			if j != i && !awayAt(j, t) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
