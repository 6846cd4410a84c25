package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// link is the network between one daemon and its database (-partitions):
// a TCP proxy the daemon's store URL points at, which the harness can
// partition. While partitioned it carries nothing, either way, on any of
// the daemon's connections, old or new, and closes none: what either side
// sends, a close included, waits in the link (and, past one buffer, in the
// sockets' buffers, stalling the sender as TCP does) until the partition
// heals, as across a network that stopped carrying packets for a while.
// The database then ends the daemon's lease session when it has been idle
// for the lease, and the other replicas take its shards; the daemon, alive
// all along, goes on scheduling and probing, and none of what it writes
// reaches the database until the partition heals.
type link struct {
	ln     net.Listener
	target string

	mu sync.Mutex
	// open is closed while the link carries bytes; a partition replaces
	// it with one that heal closes.
	open  chan struct{}
	conns map[net.Conn]struct{}
	done  bool
}

// newLink listens on a loopback port for connections to target.
func newLink(target string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, target: target, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(l.open)
	go l.serve()
	return l, nil
}

func (l *link) addr() string { return l.ln.Addr().String() }

// pass returns once the link carries bytes.
func (l *link) pass() {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	<-open
}

// partitioned reports whether the link carries nothing now.
func (l *link) partitioned() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		return false
	default:
		return true
	}
}

// partition stops the link carrying bytes until heal.
func (l *link) partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default:
	}
}

// heal lets what waited in the link through, and what follows.
func (l *link) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
	default:
		close(l.open)
	}
}

// close heals the link, stops it accepting and closes every connection it
// carries.
func (l *link) close() {
	l.heal()
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	for c := range l.conns {
		c.Close()
	}
}

// track adds c to the connections close closes, or closes it when the
// link is closed.
func (l *link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *link) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

func (l *link) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if l.track(c) {
			go l.carry(c)
		}
	}
}

// carry joins the daemon's connection c to the database, once the link
// carries bytes. A connection the daemon gave up on while the link was
// partitioned (a connect that timed out: its first bytes, then its
// close, wait in c) is dropped rather than opened on the database, as a
// connect lost in a real partition never reaches the server.
func (l *link) carry(c net.Conn) {
	defer l.untrack(c)
	waited := l.partitioned()
	l.pass()
	var first []byte
	buf := make([]byte, 32<<10)
	for waited {
		// What the daemon sent while the link was partitioned, up to
		// a pause: its close, if it gave up.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := c.Read(buf)
		first = append(first, buf[:n]...)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	db, err := net.Dial("tcp", l.target)
	if err != nil {
		return
	}
	if !l.track(db) {
		return
	}
	defer l.untrack(db)
	if _, err := db.Write(first); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { l.pipe(db, c); done <- struct{}{} }()
	go func() { l.pipe(c, db); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst while the link carries bytes; what it read while
// partitioned, a close included, waits for the link to heal.
func (l *link) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		l.pass()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// partitionRecord is one partition: of which daemon (-1: all), from when
// until it healed.
type partitionRecord struct {
	replica        int
	at, healed     time.Time
	lost, takenFor int // the daemon's "shards lost" lines after it; the others' "shards taken" lines during it
	// held is how many shards the daemon cut off held as it began (-1:
	// it did not say, or a partition of every daemon).
	held int
	// unready is how long after the partition began its daemon's
	// /readyz first answered 503 (a load balancer then stops sending to
	// it), ready how long after it healed 200 again; -1 when it did not
	// within the partition, or within 30 s of the heal.
	unready, ready time.Duration
	// unreadyAnswer is what /readyz answered when it was not ready.
	unreadyAnswer string
	// othersUnready names the other daemons whose /readyz did not answer
	// 200 in three probes a few seconds before the heal, with what it
	// answered.
	othersUnready []string
}

// partitionAtRandom cuts daemons off from the database h.partitions
// times, each for h.partitionFor, at instants drawn across the middle
// eight tenths of the spread from t0 (one after another, the next at
// least 5 s after the last healed, when they overlap), in a goroutine of
// its own: one daemon at the odd partitions (the first, the third…: one
// replica cut off while the others take its shards; the one drawn at
// random, or the next after it that holds shards), every daemon at the
// even ones (the database unreachable for all: every lease lapses at
// once; never begun while a daemon is frozen, whose shards the others
// must be able to take). The channel it returns yields nil once the last
// has healed.
func (h *harness) partitionAtRandom(t0 time.Time) <-chan error {
	at, target := h.instants(t0, h.partitions), h.alternate(h.partitions, true)
	done := make(chan error, 1)
	go func() {
		var healed time.Time
		for k, t := range at {
			// At least a renewal after the last healed, so that what
			// each partition did shows before the next.
			sleepUntil(t)
			sleepUntil(healed.Add(5 * time.Second))
			rec := partitionRecord{replica: target[k]}
			var off []int
			// Every daemon not while one is frozen (the others must be
			// able to take its shards); one daemon at any time: the one
			// drawn, or the next that holds shards.
			busy := func() bool { return target[k] < 0 && h.frozen.Load() >= 0 }
			h.exclusive(busy, func() {
				if rec.replica >= 0 {
					rec.replica, rec.held = h.holder(rec.replica, func(int) bool { return true })
					off = []int{rec.replica}
				} else {
					rec.held = -1 // not asked: nobody can take them meanwhile
					for i := range h.replicas {
						off = append(off, i)
					}
				}
				rec.at = time.Now()
				for _, i := range off {
					h.links[i].partition()
				}
			})
			fmt.Fprintf(h.logf, "--- partition of %s from the database at %s\n", daemonsName(rec.replica), vigil.FormatTime(rec.at))
			healAt := rec.at.Add(h.partitionFor)
			for _, i := range off {
				d, answer := h.readyWithin(i, false, healAt, rec.at)
				rec.unready = later(rec.unready, d)
				rec.unreadyAnswer = answer
			}
			sleepUntil(healAt.Add(-5 * time.Second))
			rec.othersUnready = h.unreadyOthers(func(j int) bool { return slices.Contains(off, j) || h.isFrozen(j) })
			sleepUntil(healAt)
			for _, i := range off {
				h.links[i].heal()
			}
			rec.healed = time.Now()
			healed = rec.healed
			for _, i := range off {
				d, _ := h.readyWithin(i, true, rec.healed.Add(30*time.Second), rec.healed)
				rec.ready = later(rec.ready, d)
			}
			fmt.Fprintf(h.logf, "--- partition of %s healed at %s\n", daemonsName(rec.replica), vigil.FormatTime(rec.healed))
			h.hookMu.Lock()
			h.partitionLog = append(h.partitionLog, rec)
			h.hookMu.Unlock()
		}
		done <- nil
	}()
	return done
}

// waitWhile waits while cond holds, and reports whether it waited.
func waitWhile(cond func() bool) bool {
	waited := false
	for cond() {
		waited = true
		time.Sleep(100 * time.Millisecond)
	}
	return waited
}

// later is the later of two delays, where -1 (never) is the latest.
func later(a, b time.Duration) time.Duration {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// instants draws n instants across the middle eight tenths of the spread
// from t0, in order.
func (h *harness) instants(t0 time.Time, n int) []time.Time {
	at := make([]time.Time, n)
	for k := range at {
		at[k] = t0.Add(h.spread/10 + time.Duration(h.rnd.Int64N(int64(h.spread*8/10))))
	}
	slices.SortFunc(at, time.Time.Compare)
	return at
}

// alternate draws the targets of n faults, one daemon drawn at random
// (its index) or every daemon (-1) in turn, the first one daemon when
// oneFirst.
func (h *harness) alternate(n int, oneFirst bool) []int {
	target := make([]int, n)
	for k := range target {
		target[k] = -1
		if (k%2 == 0) == oneFirst {
			target[k] = h.rnd.IntN(h.replicas)
		}
	}
	return target
}

// unreadyOthers probes the /readyz of every daemon but those skip names,
// as a load balancer sees them: ready, or back within three probes (one
// slow answer under load is not a replica out of rotation). It names
// those that were not, with what they answered.
func (h *harness) unreadyOthers(skip func(int) bool) []string {
	var out []string
	for j := range h.replicas {
		if skip(j) {
			continue
		}
		ok, answer := h.isReady(j)
		for try := 1; !ok && try < 3; try++ {
			time.Sleep(500 * time.Millisecond)
			ok, answer = h.isReady(j)
		}
		if !ok {
			out = append(out, fmt.Sprintf("daemon %d (%s)", j, answer))
		}
	}
	return out
}

// shardMoves counts, among the daemons' log lines, the losses of shards
// that daemon replica (-1: every daemon), cut off or frozen from start to
// end, logged from start until 30 s after end (they are logged at its
// first step back) and before the next fault of it (nextFault), and the
// takings that the others logged from start to end.
func (h *harness) shardMoves(lines []logLine, replica int, start, end time.Time) (lost, taken int) {
	me := fmt.Sprintf("replica=crash-%d ", replica)
	mine := func(text string) bool { return replica < 0 || strings.Contains(text, me) }
	next := h.nextFault(replica, start)
	until := end.Add(30 * time.Second)
	if !next.IsZero() && next.Before(until) {
		until = next
	}
	for _, ln := range lines {
		switch {
		case ln.at.Before(start):
		case strings.Contains(ln.text, `msg="shards lost`) && mine(ln.text) && ln.at.Before(until):
			lost++
		case strings.Contains(ln.text, `msg="shards taken"`) && !mine(ln.text) && ln.at.Before(end):
			taken++
		}
	}
	return lost, taken
}

// shardsOwned reads how many shards daemon i holds now from its /metrics
// (vigil_shards_owned), within 2 s; -1 when it did not answer (killed,
// restarting, frozen, or too slow).
func (h *harness) shardsOwned(i int) int {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + h.addrs[i] + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "vigil_shards_owned "); ok {
			if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// holder picks, of the daemons from first on (in turn, round the ring)
// for which ok holds, the first that holds shards now (a fault of it then
// has shards to lose), else the first that answered, else the first;
// with how many it holds (-1: it did not say). It returns -1 when ok
// holds for none.
func (h *harness) holder(first int, ok func(int) bool) (int, int) {
	pick, held := -1, -1
	for j := range h.replicas {
		c := (first + j) % h.replicas
		if !ok(c) {
			continue
		}
		n := -1
		if !h.isFrozen(c) {
			n = h.shardsOwned(c)
		}
		if n > 0 {
			return c, n
		}
		if pick < 0 || held < 0 && n == 0 {
			pick, held = c, n
		}
	}
	return pick, held
}

// isReady reports whether daemon i's /readyz answers 200 within 2 s (its
// store check alone may take 1 s), and what it answered.
func (h *harness) isReady(i int) (bool, string) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + h.addrs[i] + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// readyWithin polls daemon i's /readyz until it is ready (or not, with
// ready false), before until, and returns how long after since that
// was, or -1, and what it answered then.
func (h *harness) readyWithin(i int, ready bool, until, since time.Time) (time.Duration, string) {
	for time.Now().Before(until) {
		if ok, answer := h.isReady(i); ok == ready {
			return time.Since(since), answer
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, ""
}

// partitionsLanded prints what each partition did, from the daemons' log:
// the partitioned daemon's lease lapsed, so it logged the shards it lost
// once it could reach the database again, and the others took shards
// meanwhile. A run whose partitions were all shorter than the lease
// proves the same of nothing; one that was long enough, in which a
// daemon partitioned alone held shards with another there to take them,
// and none such lost its shards, is a violation (the partitions did not
// cut it off).
func (h *harness) partitionsLanded(lines []logLine, watches map[string]*vigil.Watch, lease time.Duration, bad func(string, ...any)) {
	lapsed, checked := 0, 0
	for k := range h.partitionLog {
		rec := &h.partitionLog[k]
		check := rec.replica >= 0 && rec.held > 0 && !h.othersAway(rec.replica, rec.at, rec.healed)
		rec.lost, rec.takenFor = h.shardMoves(lines, rec.replica, rec.at, rec.healed)
		if check {
			checked++
			if rec.lost > 0 {
				lapsed++
			}
		}
		during := 0
		for _, w := range watches {
			if !w.SettledAt.IsZero() && w.SettledAt.After(rec.at) && w.SettledAt.Before(rec.healed) {
				during++
			}
		}
		unready := delay(rec.unready)
		if rec.unreadyAnswer != "" {
			unready += " (" + rec.unreadyAnswer + ")"
		}
		holding := ""
		if rec.replica >= 0 {
			holding = ", holding " + shardCount(rec.held) + ","
		}
		fmt.Printf("partition %d: %s%s cut off from the database for %v; not ready after %s, ready again %s after it healed; then %d losses of shards logged, %d takings by the others meanwhile; %d watches settled during it\n",
			k+1, daemonsName(rec.replica), holding, rec.healed.Sub(rec.at).Round(100*time.Millisecond), unready, delay(rec.ready),
			rec.lost, rec.takenFor, during)
		if rec.unready < 0 {
			bad("partition %d: the /readyz of %s answered 200 throughout, though it could not reach its database", k+1, daemonsName(rec.replica))
		}
		if rec.ready < 0 {
			bad("partition %d: the /readyz of %s did not answer 200 within 30 s of the partition healing", k+1, daemonsName(rec.replica))
		}
		if len(rec.othersUnready) > 0 {
			bad("partition %d: %s, not cut off, not ready during it", k+1, strings.Join(rec.othersUnready, ", "))
		}
	}
	if len(h.partitionLog) > 0 {
		lapseChecked("partitions", len(h.partitionLog), checked, lapsed, h.partitionFor > lease, lease, bad)
	}
}

// delay formats a delay of readyWithin: -1 is never.
func delay(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(100 * time.Millisecond).String()
}

// logLine is a line of the daemons' log with the time it gives.
type logLine struct {
	at   time.Time
	text string
}

// logLines reads the daemons' log lines that carry a time (slog's
// "time=…" first).
func logLines(path string) ([]logLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logLine
	r := bufio.NewReader(f)
	for {
		s, err := r.ReadString('\n')
		if rest, ok := strings.CutPrefix(s, "time="); ok {
			if ts, _, ok := strings.Cut(rest, " "); ok {
				if t, perr := time.Parse(time.RFC3339Nano, ts); perr == nil {
					out = append(out, logLine{at: t, text: s})
				}
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
