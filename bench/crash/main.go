// Command crash is the crash harness: it builds the real vigil binary,
// starts `vigil serve` on a loopback port with a temporary data directory,
// registers timer and http watches (some with webhooks to a local
// receiver), SIGKILLs the daemon at random moments while they fire and
// restarts it on the same data directory, then checks what SPEC §4 and §5
// promise whatever crashes:
//
//   - every watch reaches exactly one terminal state, and none that should
//     have fired is left pending;
//   - every settled watch has exactly one message in its recipient's
//     mailbox (read through the client with a fresh reader), a pending one
//     none;
//   - no webhook id is received twice unless the watch set retry_unknown,
//     none is received that is not a mailbox message's id, and a receipt
//     that says delivered was received;
//   - with -channels 2 (a webhook and a delivery command per watch, on a
//     busy delivery pool), every channel of every settled watch has a
//     receipt: none is lost across a kill, and no command runs twice.

//   - the kills proved something: the kills fall at random instants while
//     the watches fall due, and before each the webhook receiver holds the
//     requests that arrive, so the kill cuts a send short (on PostgreSQL
//     every other kill is of the replica that settled a held request's
//     watch); at least one kill must land while watches were settling (on
//     PostgreSQL: by the replica killed), and a send cut short must show
//     as an unknown receipt or a resend under retry_unknown, never as
//     delivered;
//   - with -cuts (PostgreSQL), the same whatever the database ending every
//     connection of the replicas does (a restart, a failover), and the
//     cuts landed while watches settled;
//   - with -partitions (PostgreSQL), the same whatever one daemon, or
//     every daemon, being cut off from the database for a while
//     (-partition-for, longer than the lease by default) does: none of
//     its connections carries anything, none is closed, and it goes on
//     running; its lease lapses, the others take its shards, and it loses
//     them when the partition heals; meanwhile its /readyz answers 503
//     and the others' 200, and 200 again once healed (each a violation
//     otherwise);
//   - with -freezes (PostgreSQL), the same whatever one daemon being
//     frozen for a while (SIGSTOP, then SIGCONT -freeze-for later, longer
//     than the lease by default: a long pause, a VM stopped) does: its
//     lease lapses, the others take its shards, and once thawed it finds
//     them lost and is ready again; the others stay ready (each a
//     violation otherwise);
//   - no daemon exits unless the harness killed it (one that dies on its
//     own leaves its work to the other replicas, and the counts alone
//     would not show it), and each restarted one is ready within 30 s.
//
// It prints the counts and exits 1 on any violation. See bench/README.md.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

func main() {
	n := flag.Int("n", 5000, "watches")
	kills := flag.Int("kills", 10, "SIGKILLs while the watches fire")
	spread := flag.Duration("spread", 10*time.Second, "the watches fall due across this long")
	hooks := flag.Float64("webhooks", 0.3, "share of the watches with push delivery: a webhook (half of them with retry_unknown)")
	channels := flag.Int("channels", 1, "push channels per watch with push delivery: 1, a webhook; 2, a webhook and a delivery command, "+
		"each taking up to 200 ms, so the daemon's delivery workers are busy and channels wait in their queue when it is killed")
	seed := flag.Uint64("seed", 0, "random seed (0: from the clock); printed so a run can be repeated")
	keep := flag.Bool("keep", false, "keep the temporary directory (data dir, daemon log) even when all is well")
	replicas := flag.Int("replicas", 1, "daemons on one PostgreSQL database (-store); each kill SIGKILLs one of them at random and restarts it")
	store := flag.String("store", "", "postgres://… URL: run the daemons on a fresh schema of this database (dropped afterwards unless -keep); empty: SQLite")
	cuts := flag.Int("cuts", 0, "with -store: times the database ends the connections of the daemons (pg_terminate_backend), at random instants while "+
		"the watches fire, between the kills: every daemon's at the first, third… (a database restarting or failing over), one daemon's at the second, fourth… (one replica cut off)")
	partitions := flag.Int("partitions", 0, "with -store: times daemons are cut off from the database (every connection stalls, none is closed), "+
		"at random instants while the watches fire, for -partition-for each: one daemon drawn at random at the first, third…, every daemon at the second, fourth…")
	partitionFor := flag.Duration("partition-for", 20*time.Second, "how long each partition lasts (longer than the lease, 15 s by default, so the partitioned daemon's shards are taken over)")
	freezes := flag.Int("freezes", 0, "with -store: times one daemon drawn at random is frozen (SIGSTOP, then SIGCONT), at random instants while the watches fire, for -freeze-for each")
	freezeFor := flag.Duration("freeze-for", 20*time.Second, "how long each freeze lasts (longer than the lease, 15 s by default, so the frozen daemon's shards are taken over)")
	flag.Parse()
	checkFault("partitions", *partitions, *partitionFor, *store)
	checkFault("freezes", *freezes, *freezeFor, *store)
	if *replicas < 1 || *replicas > 16 || (*replicas > 1 && *store == "") {
		log.Fatalf("-replicas %d: from 1 to 16, and more than 1 needs -store postgres://…", *replicas)
	}
	if *cuts < 0 || (*cuts > 0 && *store == "") {
		log.Fatalf("-cuts %d: at least 0, and more than 0 needs -store postgres://…", *cuts)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if *channels != 1 && *channels != 2 {
		log.Fatalf("-channels %d: must be 1 or 2", *channels)
	}
	log.SetFlags(0)
	log.SetPrefix("crash: ")
	h := &harness{n: *n, kills: *kills, cuts: *cuts, spread: *spread, hookShare: *hooks, seed: *seed, command: *channels == 2,
		rnd: rand.New(rand.NewPCG(*seed, 0x5eed)), replicas: *replicas, baseStore: *store, keep: *keep,
		partitions: *partitions, partitionFor: *partitionFor, freezes: *freezes, freezeFor: *freezeFor}
	h.frozen.Store(-1)
	violations, err := h.run()
	if h.dir != "" {
		if err != nil || violations > 0 || *keep {
			fmt.Fprintf(os.Stderr, "crash: kept %s (daemon log: %s)\n", h.dir, filepath.Join(h.dir, "daemon.log"))
		} else {
			os.RemoveAll(h.dir)
		}
	}
	if err != nil {
		log.Fatalf("%v (seed %d)", err, *seed)
	}
	if violations > 0 {
		log.Fatalf("%d violation(s) (seed %d)", violations, *seed)
	}
}

// harness holds one run.
type harness struct {
	n, kills int
	// cuts is how many times the database ends the daemons' connections
	// (-cuts); cutLog says what each ended.
	cuts   int
	cutLog []cutRecord
	// partitions is how many times one daemon is cut off from the
	// database (-partitions), each for partitionFor, through its link;
	// partitionLog is what each partition did.
	partitions   int
	partitionFor time.Duration
	links        []*link
	partitionLog []partitionRecord
	// freezes is how many times one daemon is frozen (-freezes), each
	// for freezeFor; frozen is the daemon frozen now (-1: none),
	// freezeLog what each freeze did. faultMu orders the starts of a
	// freeze and a partition of every daemon (exclusive).
	freezes   int
	freezeFor time.Duration
	frozen    atomic.Int64
	freezeLog []freezeRecord
	faultMu   sync.Mutex
	spread    time.Duration
	hookShare float64
	seed      uint64
	rnd       *rand.Rand
	// command gives every watch with a webhook a delivery command too,
	// and makes both slow (-channels 2).
	command bool

	dir, bin string
	ranDir   string // one file per message id the delivery command ran for, a line per run
	logf     *os.File
	starts   int
	// replicas daemons, each with its address, data dir and process;
	// on PostgreSQL (baseStore) they share store, a fresh schema.
	replicas         int
	baseStore, store string
	keep             bool
	addrs, dataDirs  []string
	procs            []*exec.Cmd // written under procMu (signal reads them from another goroutine)
	procMu           sync.Mutex
	exited           []chan struct{} // closed when procs[i] has exited
	exitErr          []error         // how procs[i] exited, once exited[i] is closed
	killed           []int           // kills per replica
	died             []string        // daemons that exited without a SIGKILL of the harness
	killLog          []killRecord    // what each kill cut short

	flips    []atomic.Int64 // per http watch index: unix nanos after which it answers done
	hookMu   sync.Mutex
	received map[string]int // webhook-id -> times received
	// Webhook requests the receiver is answering now, and those it holds
	// unanswered while park is set: before each kill the harness parks
	// the requests that arrive, so the kill lands on a send in flight.
	inFlight atomic.Int64
	park     atomic.Bool
	parked   atomic.Int64
	parkedID string        // the first parked request's webhook-id
	release  chan struct{} // closed to let the parked requests answer
}

// killRecord is one SIGKILL and what was in flight when it landed.
type killRecord struct {
	replica  int
	at       time.Time
	inFlight int64 // webhook requests the receiver was answering
	parked   int64 // of those, held by the harness so the kill cut them short
	// sender: the replica killed is the one that settled the watch of a
	// held request, so its send is cut (on PostgreSQL, where replicas
	// share the work; with one daemon it always is).
	sender bool
}

// cutRecord is one cut: when, of which daemon (-1: all), and how many of
// its connections the database ended.
type cutRecord struct {
	at      time.Time
	replica int
	ended   int
}

// plan is what the harness registered for one watch.
type plan struct {
	id           string
	kind         vigil.Kind
	due          time.Time // when it should fire: the timer's at, or the http flip
	webhook      bool
	retryUnknown bool
	command      bool // a delivery command too
}

func (h *harness) run() (int, error) {
	var err error
	if h.dir, err = os.MkdirTemp("", "vigil-crash-"); err != nil {
		return 0, err
	}
	h.bin = filepath.Join(h.dir, "vigil")
	h.addrs, h.dataDirs, h.procs, h.killed = make([]string, h.replicas), make([]string, h.replicas), make([]*exec.Cmd, h.replicas), make([]int, h.replicas)
	h.exited, h.exitErr = make([]chan struct{}, h.replicas), make([]error, h.replicas)
	for i := range h.replicas {
		h.dataDirs[i] = filepath.Join(h.dir, fmt.Sprintf("data%d", i))
	}
	if h.baseStore != "" {
		// Replicas on one database: they sign with the same keys.
		if err := h.shareKeys(); err != nil {
			return 0, err
		}
	}
	if h.baseStore != "" {
		if h.store, err = h.schema(); err != nil {
			return 0, err
		}
		defer h.dropSchema()
	}
	if h.partitions > 0 {
		if err := h.makeLinks(); err != nil {
			return 0, err
		}
		defer func() {
			for _, l := range h.links {
				l.close()
			}
		}()
	}
	if h.logf, err = os.Create(filepath.Join(h.dir, "daemon.log")); err != nil {
		return 0, err
	}
	h.ranDir = filepath.Join(h.dir, "ran")
	if err := os.MkdirAll(h.ranDir, 0o700); err != nil {
		return 0, err
	}
	defer h.logf.Close()
	if err := h.build(); err != nil {
		return 0, err
	}
	for i := range h.addrs {
		if h.addrs[i], err = freeAddr(); err != nil {
			return 0, err
		}
	}
	defer h.stop()

	// The http watches' endpoint: {"done":false} until the watch's flip
	// time, then {"done":true}.
	h.flips = make([]atomic.Int64, h.n)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/w/"))
		if err != nil || i < 0 || i >= len(h.flips) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"done":%t}`, time.Now().UnixNano() >= h.flips[i].Load())
	}))
	defer target.Close()
	// The webhook receiver records every webhook-id, then answers 200 after
	// a short random pause, so some kills land mid-send.
	h.received = map[string]int{}
	h.release = make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		h.hookMu.Lock()
		h.received[id]++
		release := h.release
		h.hookMu.Unlock()
		if h.park.Load() {
			// Held until the kill has landed (well under the daemon's
			// 10 s webhook timeout): the send is cut short mid-flight.
			if h.parked.Add(1) == 1 {
				h.hookMu.Lock()
				h.parkedID = id
				h.hookMu.Unlock()
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		pause := 30
		if h.command {
			pause = 200 // a busy pool: the channels queue behind the slow ones
		}
		time.Sleep(time.Duration(rand.IntN(pause)) * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var c *client.Client
	for i := range h.replicas {
		if err := h.start(i); err != nil {
			return 0, err
		}
		if c, err = h.ready(ctx, i); err != nil {
			return 0, err
		}
	}

	// Register: timers due across the spread, http watches whose endpoint
	// flips to done across it, every one starting a moment from now.
	t0 := time.Now().Add(2*time.Second + time.Duration(h.n)*100*time.Microsecond)
	plans := make([]plan, h.n)
	taken := map[string]bool{} // recipient and due instant: a timer's identity
	for i := range plans {
		p := &plans[i]
		p.due = t0.Add(time.Duration(h.rnd.Int64N(int64(h.spread)))).Truncate(time.Millisecond)
		for taken[recipient(i)+vigil.FormatTime(p.due)] {
			p.due = p.due.Add(time.Millisecond)
		}
		taken[recipient(i)+vigil.FormatTime(p.due)] = true
		p.kind = vigil.KindTimer
		if h.rnd.IntN(5) < 2 {
			p.kind = vigil.KindHTTP
			h.flips[i].Store(p.due.UnixNano())
		}
		if h.rnd.Float64() < h.hookShare {
			p.webhook, p.retryUnknown, p.command = true, h.rnd.IntN(2) == 0, h.command
		}
	}
	regStart := time.Now()
	if err := h.registerAll(ctx, c, plans, target.URL, receiver.URL); err != nil {
		return 0, err
	}
	fmt.Printf("registered %d watches in %v (%d timers, %d http, %d with a webhook, %d with a delivery command)\n", h.n,
		time.Since(regStart).Round(time.Millisecond), count(plans, func(p plan) bool { return p.kind == vigil.KindTimer }),
		count(plans, func(p plan) bool { return p.kind == vigil.KindHTTP }), count(plans, func(p plan) bool { return p.webhook }),
		count(plans, func(p plan) bool { return p.command }))

	// Kill at random instants while they fire, drawn across the window
	// from t0 to a little past the last due instant (a kill whose instant
	// passed while the daemon restarted lands as soon as it is ready).
	// Before each, the receiver holds the webhook requests that arrive,
	// up to a second, so that the kill cuts a send short.
	window := h.spread + time.Second
	at := make([]time.Time, h.kills)
	for k := range at {
		at[k] = t0.Add(time.Duration(h.rnd.Int64N(int64(window))))
	}
	slices.SortFunc(at, time.Time.Compare)
	cutsDone := h.cutAtRandom(t0)
	partitionsDone := h.partitionAtRandom(t0)
	freezesDone := h.freezeAtRandom(t0)
	for k := range h.kills {
		sleepUntil(at[k])
		h.hookMu.Lock()
		h.release, h.parkedID = make(chan struct{}), ""
		h.hookMu.Unlock()
		h.parked.Store(0)
		h.park.Store(true)
		for t := time.Now(); h.parked.Load() == 0 && time.Since(t) < time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		i := h.rnd.IntN(h.replicas)
		// Not a daemon cut off from the database or frozen, while one
		// is not: their checks read its losses once it is back.
		for j := range h.replicas {
			if c := (i + j) % h.replicas; !h.away(c) {
				i = c
				break
			}
		}
		sender := h.replicas == 1
		h.hookMu.Lock()
		parkedID := h.parkedID
		h.hookMu.Unlock()
		if h.store != "" && parkedID != "" && k%2 == 0 {
			// Every other kill: the replica sending the held request.
			if j, err := h.settler(parkedID); err == nil && j >= 0 && !h.away(j) {
				i, sender = j, true
			}
		}
		rec := killRecord{replica: i, at: time.Now(), inFlight: h.inFlight.Load(), parked: h.parked.Load(), sender: sender}
		err := h.kill(i)
		h.park.Store(false)
		h.hookMu.Lock()
		close(h.release)
		h.hookMu.Unlock()
		if err != nil {
			return 0, err
		}
		h.killLog = append(h.killLog, rec)
		if err := h.start(i); err != nil {
			return 0, err
		}
		if c, err = h.ready(ctx, i); err != nil {
			return 0, fmt.Errorf("after kill %d: %w", k+1, err)
		}
	}
	if err := <-cutsDone; err != nil {
		return 0, err
	}
	if err := <-partitionsDone; err != nil {
		return 0, err
	}
	if err := <-freezesDone; err != nil {
		return 0, err
	}
	lastKill := time.Now()
	if h.replicas > 1 {
		fmt.Printf("%d replicas on PostgreSQL; SIGKILLs per replica: %v\n", h.replicas, h.killed)
	}

	// Wait until every watch has settled and every receipt has an end,
	// bounded: a watch still pending a minute after it fell due (and after
	// the last restart) is a violation, not a reason to wait on. While
	// the deliveries still move (fewer unfinished at each look: a backlog
	// of slow delivery commands on the replicas left serving), a minute
	// more from the last move, up to ten after that bound; a delivery that
	// stopped moving is a violation still.
	last := slices.MaxFunc(plans, func(a, b plan) int { return a.due.Compare(b.due) }).due
	limit := last
	if lastKill.After(limit) {
		limit = lastKill
	}
	limit = limit.Add(60 * time.Second)
	longest := limit.Add(10 * time.Minute)
	least := -1
	var watches map[string]*vigil.Watch
	for {
		if watches, err = listAll(ctx, c); err != nil {
			return 0, err
		}
		n := unfinished(watches, plans)
		if n == 0 || time.Now().After(limit) {
			break
		}
		if more := time.Now().Add(60 * time.Second); least >= 0 && n < least && more.After(limit) {
			limit = more
			if limit.After(longest) {
				limit = longest
			}
		}
		if least < 0 || n < least {
			least = n
		}
		time.Sleep(500 * time.Millisecond)
	}
	if quiet(watches, plans) {
		// A moment more, and the list again: a send that comes after
		// every receipt has ended (a resend of a delivered webhook, a
		// replica's late repair) is still counted.
		time.Sleep(linger)
		if watches, err = listAll(ctx, c); err != nil {
			return 0, err
		}
	}
	h.alive()
	return h.check(ctx, c, plans, watches)
}

// cutAtRandom has the database end the connections of the daemons h.cuts
// times, at random instants drawn across the middle eight tenths of the
// spread from t0 (while watches settle before and after each), in a
// goroutine of its own: every daemon's at the odd cuts (the first, the
// third…), one daemon's drawn at random at the even ones (that replica
// cut off alone, while the others keep their leases and take its shards).
// The channel it returns yields nil after the last cut, or the error that
// stopped the cuts.
func (h *harness) cutAtRandom(t0 time.Time) <-chan error {
	// Drawn here: the kills draw from h.rnd meanwhile.
	at, target := h.instants(t0, h.cuts), h.alternate(h.cuts, false)
	done := make(chan error, 1)
	go func() {
		for k, t := range at {
			sleepUntil(t)
			n, err := h.cut(target[k])
			if err != nil {
				done <- fmt.Errorf("cutting the daemons' connections: %w", err)
				return
			}
			fmt.Fprintf(h.logf, "--- the database ended %d connections of %s at %s\n", n, daemonsName(target[k]), vigil.FormatTime(time.Now()))
			h.hookMu.Lock()
			h.cutLog = append(h.cutLog, cutRecord{at: time.Now(), ended: n, replica: target[k]})
			h.hookMu.Unlock()
		}
		done <- nil
	}()
	return done
}

// daemonsName names the daemons a cut of replica (-1: all) ends the
// connections of.
func daemonsName(replica int) string {
	if replica < 0 {
		return "the daemons"
	}
	return fmt.Sprintf("daemon %d alone", replica)
}

// cut has the database end every connection of daemon replica, or of
// every daemon (-1): those whose application_name starts with the one
// start gives it (its pools, lease session, listeners), at once, as a
// database restarting or failing over (or a network cutting one replica
// off) does, and returns how many it ended.
func (h *harness) cut(replica int) (int, error) {
	prefix := h.appName() + "-"
	if replica >= 0 {
		prefix = h.appName(replica)
	}
	var n int
	err := h.queryRow(10*time.Second, &n, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND starts_with(application_name, $1)`, prefix)
	return n, err
}

// queryRow runs query on a connection of its own to the harness's
// schema, within timeout, and scans its one row into dest.
func (h *harness) queryRow(timeout time.Duration, dest any, query string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := pgx.Connect(ctx, h.store)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.QueryRow(ctx, query, args...).Scan(dest)
}

// appName is the start of the application_name of the daemons'
// connections; appName(i), daemon i's (before what the store appends to
// it for its own sessions), which no other daemon's starts with.
func (h *harness) appName(replica ...int) string {
	name := fmt.Sprintf("vigil-crash-%d", h.seed%1_000_000_007)
	if len(replica) > 0 {
		name += fmt.Sprintf("-r%d.", replica[0])
	}
	return name
}

// defaultLease is vigil's lease on PostgreSQL, which the harness leaves
// at its default (docs/operations.md).
const defaultLease = 15 * time.Second

// cutOff reports whether daemon i is cut off from the database now.
func (h *harness) cutOff(i int) bool { return h.links != nil && h.links[i].partitioned() }

// away reports whether daemon i is cut off from the database or frozen
// now: the kills spare it.
func (h *harness) away(i int) bool { return h.cutOff(i) || h.isFrozen(i) }

// checkFault ends the run on a bad -NAME N -NAME-for D: N at least 0,
// more than 0 only on PostgreSQL (store), D more than 0.
func checkFault(name string, n int, d time.Duration, store string) {
	if n < 0 || (n > 0 && store == "") || d <= 0 {
		log.Fatalf("-%s %d -%s-for %v: at least 0 %s, more than 0 needs -store postgres://…, and each lasts more than 0", name, n, strings.TrimSuffix(name, "s"), d, name)
	}
}

// makeLinks makes each daemon's link to the database (-partitions).
func (h *harness) makeLinks() error {
	u, err := url.Parse(h.store)
	if err != nil {
		return err
	}
	if u.Hostname() == "" || strings.Contains(u.Host, ",") {
		return fmt.Errorf("-partitions: the store URL must name one host (%q)", u.Host)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	h.links = make([]*link, h.replicas)
	for i := range h.links {
		if h.links[i], err = newLink(target); err != nil {
			return err
		}
	}
	return nil
}

// linger is how long the harness goes on receiving once everything has
// settled, before it counts.
const linger = 2 * time.Second

// quiet reports whether every watch has settled, every channel it pushes
// to has a receipt, and no receipt is still sending or retrying.
func quiet(ws map[string]*vigil.Watch, plans []plan) bool { return unfinished(ws, plans) == 0 }

// unfinished counts the watches still pending, the channels of settled
// ones without a receipt, and the receipts still sending or retrying.
func unfinished(ws map[string]*vigil.Watch, plans []plan) int {
	n := 0
	for _, w := range ws {
		if w.State == vigil.StatePending {
			n++
		}
		for _, r := range w.Receipts {
			if r.Status == "sending" || r.Status == "retrying" {
				n++
			}
		}
	}
	for _, p := range plans {
		w := ws[p.id]
		if w == nil || w.State == vigil.StatePending {
			continue
		}
		for _, ch := range p.channels() {
			if receipt(w, ch) == nil {
				n++
			}
		}
	}
	return n
}

// channels are the push channels p's watch delivers to.
func (p plan) channels() []string {
	var out []string
	if p.webhook {
		out = append(out, "webhook")
	}
	if p.command {
		out = append(out, "command")
	}
	return out
}

// receipt returns w's receipt of channel, or nil.
func receipt(w *vigil.Watch, channel string) *vigil.Receipt {
	for i := range w.Receipts {
		if w.Receipts[i].Channel == channel {
			return &w.Receipts[i]
		}
	}
	return nil
}

func (h *harness) check(ctx context.Context, c *client.Client, plans []plan, watches map[string]*vigil.Watch) (int, error) {
	violations := 0
	bad := func(format string, args ...any) {
		violations++
		if violations <= 20 {
			fmt.Printf("VIOLATION: "+format+"\n", args...)
		}
	}
	// Every recipient's mailbox, through a reader that has never read.
	reader := fmt.Sprintf("crash-%d", time.Now().UnixNano())
	msgs := map[string][]*vigil.Message{} // watch id -> its messages
	msgIDs := map[string]string{}         // message id -> watch id
	for r := range recipients(h.n) {
		var after int64
		for {
			var page vigil.MessagesPage
			err := unavailableAgain(ctx, func() (err error) {
				page, err = c.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: reader, After: &after, Limit: 500})
				return err
			})
			if err != nil {
				return 0, fmt.Errorf("messages of %s: %w", r, err)
			}
			if len(page.Messages) == 0 {
				break
			}
			for _, m := range page.Messages {
				msgs[m.WatchID] = append(msgs[m.WatchID], m)
				msgIDs[m.ID] = m.WatchID
				after = max(after, m.Seq)
			}
		}
	}

	var (
		states                                     = map[vigil.State]int{}
		lost, duplicated, stuck, notFired, phantom int
		delivered, unknown, undeliverable, resent  int
		channels, channelsLost                     int
		cmdDelivered, cmdUnknown                   int
		maxLate                                    time.Duration
		latest                                     string // the watch settled latest after its instant
	)
	now := time.Now()
	h.hookMu.Lock()
	received := maps.Clone(h.received) // the receiver goes on answering
	h.hookMu.Unlock()
	for _, d := range h.died {
		bad("%s", d)
	}
	for _, p := range plans {
		w := watches[p.id]
		if w == nil {
			lost++
			bad("watch %s (%s) is not listed", p.id, p.kind)
			continue
		}
		states[w.State]++
		ms := msgs[p.id]
		switch {
		case w.State == vigil.StatePending:
			if now.After(w.Deadline) || now.After(p.due.Add(60*time.Second)) {
				stuck++
				bad("watch %s (%s, due %s, deadline %s) is still pending", p.id, p.kind, vigil.FormatTime(p.due), vigil.FormatTime(w.Deadline))
			}
			if len(ms) != 0 {
				bad("pending watch %s has %d mailbox message(s)", p.id, len(ms))
			}
			continue
		case !w.State.Terminal():
			bad("watch %s is %s", p.id, w.State)
			continue
		case w.State != vigil.StateFired:
			notFired++
			bad("watch %s (%s, due %s) settled %s, want fired", p.id, p.kind, vigil.FormatTime(p.due), w.State)
		}
		if late := w.SettledAt.Sub(p.due); late > maxLate {
			maxLate = late
			latest = fmt.Sprintf("%s, %s, due %s", p.id, p.kind, vigil.FormatTime(p.due))
		}
		if p.kind == vigil.KindTimer && w.SettledAt.Before(p.due) {
			bad("timer %s fired at %s, before its instant %s", p.id, vigil.FormatTime(w.SettledAt), vigil.FormatTime(p.due))
		}
		switch len(ms) {
		case 1:
			if string(ms[0].Type) != string(w.State) {
				bad("watch %s is %s but its message is %s", p.id, w.State, ms[0].Type)
			}
		case 0:
			lost++
			bad("settled watch %s (%s) has no mailbox message", p.id, w.State)
			continue
		default:
			duplicated++
			bad("settled watch %s has %d mailbox messages", p.id, len(ms))
		}
		id := ms[0].ID
		for _, ch := range p.channels() {
			channels++
			if receipt(w, ch) == nil {
				channelsLost++
			}
		}
		if p.command {
			runs, err := h.commandRuns(id)
			if err != nil {
				return 0, err
			}
			switch rc := receipt(w, "command"); {
			case rc == nil:
				lost++
				bad("watch %s settled but has no command receipt", p.id)
			case rc.Status == "delivered":
				cmdDelivered++
				if runs == 0 {
					lost++
					bad("watch %s: command receipt delivered but the command never ran for %s", p.id, id)
				}
			case rc.Status == "unknown":
				cmdUnknown++
			default:
				bad("watch %s: command receipt %s (%s)", p.id, rc.Status, rc.Detail)
			}
			if runs > 1 {
				duplicated++
				bad("the delivery command of watch %s ran %d times for %s", p.id, runs, id)
			}
		}
		if !p.webhook {
			continue
		}
		got := received[id]
		rc := receipt(w, "webhook")
		switch {
		case rc == nil:
			lost++
			bad("watch %s settled but has no webhook receipt", p.id)
		case rc.Status == "delivered":
			delivered++
			if got == 0 {
				lost++
				bad("watch %s: receipt delivered but webhook %s was never received", p.id, id)
			}
		case rc.Status == "unknown":
			unknown++
		case rc.Status == "undeliverable":
			undeliverable++
			bad("watch %s: webhook undeliverable (%s)", p.id, rc.Detail)
		default:
			bad("watch %s: webhook receipt still %s", p.id, rc.Status)
		}
		if got > 1 {
			if p.retryUnknown {
				resent++
			} else {
				duplicated++
				bad("webhook %s of watch %s received %d times without retry_unknown (receipt %+v)", id, p.id, got, rc)
			}
		}
	}
	for id := range received {
		if _, ok := msgIDs[id]; !ok {
			phantom++
			bad("webhook id %q received that is no mailbox message's id", id)
		}
	}
	for id, wid := range msgIDs {
		if _, ok := watches[wid]; !ok {
			bad("message %s for a watch %q the harness did not register", id, wid)
		}
	}

	if err := h.killsLanded(watches, bad); err != nil {
		return 0, err
	}
	h.cutsLanded(watches, bad)
	if len(h.partitionLog)+len(h.freezeLog) > 0 {
		lines, err := logLines(filepath.Join(h.dir, "daemon.log"))
		if err != nil {
			return 0, err
		}
		h.partitionsLanded(lines, watches, defaultLease, bad)
		h.freezesLanded(lines, defaultLease, bad)
	}
	if len(h.killLog) > 0 && h.hookShare > 0 {
		// Each kill held the requests the receiver had taken: one at
		// least was cut short, so its receipt ended unknown or it was
		// resent under retry_unknown. Neither: the kills proved nothing
		// about sends in flight.
		parked := 0
		for _, k := range h.killLog {
			if k.sender {
				parked += int(k.parked)
			}
		}
		if parked > 0 && unknown+cmdUnknown+resent == 0 {
			bad("%d webhook request(s) were held across kills of their sender, yet no receipt ended unknown and none was resent", parked)
		}
	}

	fmt.Printf("%d watches, %d kills, lost %d, duplicated %d, stuck %d, not fired %d, phantom webhooks %d; states %v; webhooks: %d delivered, %d unknown, %d undeliverable, %d resent under retry_unknown; latest fire %v after its instant (%s; seed %d)\n",
		h.n, h.kills, lost, duplicated, stuck, notFired, phantom, states, delivered, unknown, undeliverable, resent,
		maxLate.Round(time.Millisecond), latest, h.seed)
	fmt.Printf("push channels: %d of settled watches, %d lost (no receipt); delivery commands: %d delivered, %d unknown\n",
		channels, channelsLost, cmdDelivered, cmdUnknown)
	if len(h.cutLog)+len(h.partitionLog)+len(h.freezeLog) > 0 {
		fmt.Printf("requests of the harness answered unavailable (asked again): %d\n", unavailableAnswers.Load())
	}
	if violations > 20 {
		fmt.Printf("… and %d more violations\n", violations-20)
	}
	return violations, nil
}

func (h *harness) registerAll(ctx context.Context, c *client.Client, plans []plan, target, receiver string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(plans) {
					return
				}
				p := &plans[i]
				req := vigil.RegisterRequest{Kind: p.kind, Recipient: recipient(i), Note: strconv.Itoa(i)}
				switch p.kind {
				case vigil.KindTimer:
					req.Predicate = json.RawMessage(`{"at":"` + vigil.FormatTime(p.due) + `"}`)
				case vigil.KindHTTP:
					req.Predicate = json.RawMessage(fmt.Sprintf(`{"url":"%s/w/%d","done":{"path":"done","equals":true}}`, target, i))
					req.Every, req.Deadline = "1s", "10m"
				}
				if p.webhook {
					req.Deliver = json.RawMessage(fmt.Sprintf(`{"webhook":{"url":"%s/hook","retry_unknown":%t}}`, receiver, p.retryUnknown))
				}
				if p.command {
					// It records each run under the message id, after a
					// pause that keeps the delivery workers busy.
					shell := `cat >/dev/null; sleep 0.2; echo ran >> ` + filepath.Join(h.ranDir, "$VIGIL_MESSAGE_ID")
					cmd, _ := json.Marshal(map[string]string{"shell": shell})
					req.Deliver = json.RawMessage(fmt.Sprintf(`{"webhook":{"url":"%s/hook","retry_unknown":%t},"command":%s}`, receiver, p.retryUnknown, cmd))
				}
				w, err := c.Register(ctx, req)
				if err != nil {
					errs <- fmt.Errorf("register %d: %w", i, err)
					return
				}
				if w.Existing || w.AnsweredAtCreation {
					errs <- fmt.Errorf("register %d: existing=%t answered_at_creation=%t", i, w.Existing, w.AnsweredAtCreation)
					return
				}
				p.id = w.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(slices.Collect(func(yield func(error) bool) {
		for err := range errs {
			if !yield(err) {
				return
			}
		}
	})...)
}

// recipient spreads the watches over recipients, well under the default
// max_active_per_recipient.
func recipient(i int) string { return "r" + strconv.Itoa(i%nRecipients) }

const nRecipients = 100

func recipients(n int) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := range min(n, nRecipients) {
			if !yield(recipient(i)) {
				return
			}
		}
	}
}

func listAll(ctx context.Context, c *client.Client) (map[string]*vigil.Watch, error) {
	out := map[string]*vigil.Watch{}
	after := ""
	for {
		var page vigil.WatchPage
		err := unavailableAgain(ctx, func() (err error) {
			page, err = c.Watches(ctx, vigil.ListRequest{After: after, Limit: 1000})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		for _, w := range page.Watches {
			if out[w.ID] != nil {
				return nil, fmt.Errorf("list: watch %s listed twice", w.ID)
			}
			out[w.ID] = w
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// unavailableAnswers counts the requests of the harness a daemon answered
// unavailable (its database cut off: -cuts), each asked again.
var unavailableAnswers atomic.Int64

// unavailableAgain calls fn until it returns anything but a daemon's
// unavailable answer (a request that met a connection the database had
// ended), as a client would, at most 20 times, 100 ms apart.
func unavailableAgain(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		var ve *vigil.Error
		if err == nil || !errors.As(err, &ve) || ve.Code != vigil.CodeUnavailable || try == 20 {
			return err
		}
		unavailableAnswers.Add(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// build compiles the real vigil binary from the repository this bench
// module replaces vigil with.
func (h *harness) build() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/vigil-run/vigil").Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	root := strings.TrimSpace(string(out))
	cmd := exec.Command("go", "build", "-o", h.bin, "./cmd/vigil")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// commandRuns counts the runs of the delivery command for a message id.
func (h *harness) commandRuns(messageID string) (int, error) {
	b, err := os.ReadFile(filepath.Join(h.ranDir, messageID))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "ran\n"), nil
}

// shareKeys gives every replica's data dir the same signing keys, as
// docs/operations.md (Running replicas) asks: a replica whose keys differ
// from a live one's refuses to start. Only on PostgreSQL: on SQLite a data
// dir that holds webhook.secret but no database is refused (a lost
// database, see Start-up checks).
func (h *harness) shareKeys() error {
	secret, key := make([]byte, 32), make([]byte, 32)
	crand.Read(secret)
	crand.Read(key)
	files := map[string]string{
		daemon.WebhookSecretFile: "whsec_" + base64.StdEncoding.EncodeToString(secret),
		daemon.LinkKeyFile:       base64.StdEncoding.EncodeToString(key),
	}
	for _, dir := range h.dataDirs {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *harness) start(i int) error {
	args := []string{"serve", "--listen", h.addrs[i], "--data-dir", h.dataDirs[i]}
	if h.command {
		args = append(args, "--allow-exec") // delivery commands
	}
	if h.store != "" {
		// Each daemon's connections named after it, for the cuts.
		u, err := url.Parse(h.store)
		if err != nil {
			return err
		}
		q := u.Query()
		q.Set("application_name", h.appName(i))
		u.RawQuery = q.Encode()
		if h.links != nil {
			// Through its link, which a partition stalls.
			u.Host = h.links[i].addr()
		}
		args = append(args, "--store", u.String(), "--replica", fmt.Sprintf("crash-%d", i))
	}
	cmd := exec.Command(h.bin, args...)
	home := filepath.Join(h.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	h.starts++
	fmt.Fprintf(h.logf, "--- start %d of daemon %d at %s\n", h.starts, i, vigil.FormatTime(time.Now()))
	cmd.Stdout, cmd.Stderr = h.logf, h.logf
	if err := cmd.Start(); err != nil {
		return err
	}
	h.setProc(i, cmd)
	exited := make(chan struct{})
	h.exited[i] = exited
	go func() {
		err := cmd.Wait()
		h.hookMu.Lock()
		h.exitErr[i] = err
		h.hookMu.Unlock()
		close(exited)
	}()
	return nil
}

// alive records every daemon that has exited though the harness did not
// kill it (a panic, a fatal error): its replicas would take its work over
// and the counts alone would not show it.
func (h *harness) alive() {
	for i, p := range h.procs {
		if p == nil {
			continue
		}
		select {
		case <-h.exited[i]:
			h.hookMu.Lock()
			err := h.exitErr[i]
			h.hookMu.Unlock()
			h.died = append(h.died, fmt.Sprintf("daemon %d exited on its own: %v", i, err))
			h.setProc(i, nil)
		default:
		}
	}
}

func (h *harness) kill(i int) error {
	fmt.Fprintf(h.logf, "--- SIGKILL of daemon %d at %s\n", i, vigil.FormatTime(time.Now()))
	h.alive()
	if h.procs[i] == nil {
		return nil // it died on its own: alive recorded it, start runs it again
	}
	if err := h.procs[i].Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-h.exited[i]
	h.setProc(i, nil)
	h.killed[i]++
	return nil
}

func (h *harness) stop() {
	for i, p := range h.procs {
		if p == nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGCONT) // if a freeze was cut short
		_ = p.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.exited[i]:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-h.exited[i]
		}
		h.setProc(i, nil)
	}
}

// setProc sets daemon i's process (nil: none runs), under procMu.
func (h *harness) setProc(i int, p *exec.Cmd) {
	h.procMu.Lock()
	h.procs[i] = p
	h.procMu.Unlock()
}

// ready waits (at most 30 s) for daemon i's /readyz and returns a client
// of it with its admin token.
func (h *harness) ready(ctx context.Context, i int) (*client.Client, error) {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	if h.partitions > 0 {
		// A daemon started while cut off waits for the partition.
		deadline = deadline.Add(h.partitionFor)
	}
	for {
		if resp, err := hc.Get("http://" + h.addrs[i] + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-h.exited[i]:
			return nil, fmt.Errorf("daemon %d (start %d) exited before it was ready: %v", i, h.starts, h.exitErr[i])
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("daemon %d (start %d) was not ready within 30 s", i, h.starts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok, err := daemon.ReadToken(daemon.TokenPath(h.dataDirs[i]))
	if err != nil {
		return nil, err
	}
	return client.New(h.addrs[i], tok, nil)
}

// schema creates a fresh schema on baseStore and returns the URL naming it.
func (h *harness) schema() (string, error) {
	u, err := url.Parse(h.baseStore)
	if err != nil {
		return "", fmt.Errorf("-store: %w", err)
	}
	name := fmt.Sprintf("vigil_crash_%d", h.seed%1_000_000_007)
	if err := pgExec(h.baseStore, "CREATE SCHEMA "+name); err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (h *harness) dropSchema() {
	if h.keep {
		fmt.Fprintf(os.Stderr, "crash: kept schema %s\n", h.store)
		return
	}
	u, _ := url.Parse(h.store)
	if err := pgExec(h.baseStore, "DROP SCHEMA "+u.Query().Get("search_path")+" CASCADE"); err != nil {
		log.Printf("dropping the schema: %v", err)
	}
}

func pgExec(dsn, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, stmt)
	return err
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

func count[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// killsLanded prints what each kill cut short, and counts a violation if
// none landed while watches were settling (some settled in the second
// before it and some after it: on PostgreSQL, by the replica killed), for
// a run whose kills all missed the work proves nothing.
func (h *harness) killsLanded(watches map[string]*vigil.Watch, bad func(string, ...any)) error {
	if len(h.killLog) == 0 {
		return nil
	}
	mid := 0
	for k, rec := range h.killLog {
		before, after := settledAround(watches, rec.at)
		by := ""
		if h.store != "" {
			n, err := h.settledBy(rec)
			if err != nil {
				return err
			}
			by = fmt.Sprintf(" (%d by daemon %d)", n, rec.replica)
			if n == 0 {
				before = 0
			}
		}
		if before > 0 && after > 0 {
			mid++
		}
		sender := ""
		if rec.sender && rec.parked > 0 {
			sender = ", sent by the daemon killed"
		}
		fmt.Printf("kill %d: daemon %d; %d watches settled in the second before it%s, %d after it; %d webhook requests in flight, %d held across it%s\n",
			k+1, rec.replica, before, by, after, rec.inFlight, rec.parked, sender)
	}
	if mid == 0 {
		bad("none of the %d kills landed while watches were settling", len(h.killLog))
	}
	return nil
}

// settledAround counts the watches settled in the second before at and
// those settled after it.
func settledAround(watches map[string]*vigil.Watch, at time.Time) (before, after int) {
	for _, w := range watches {
		switch {
		case w.SettledAt.IsZero():
		case w.SettledAt.After(at):
			after++
		case w.SettledAt.After(at.Add(-time.Second)):
			before++
		}
	}
	return before, after
}

// cutsLanded prints what each cut ended and how many watches settled
// around it, and counts as a violation a run whose cuts ended no
// connection of the daemons (the harness did not find them: they proved
// nothing; one cut alone may find none, landing as the daemons reconnect
// after another) or all missed the settling.
func (h *harness) cutsLanded(watches map[string]*vigil.Watch, bad func(string, ...any)) {
	mid, ended := 0, 0
	for k, rec := range h.cutLog {
		before, after := settledAround(watches, rec.at)
		if before > 0 && after > 0 {
			mid++
		}
		fmt.Printf("cut %d: the database ended %d connections of %s; %d watches settled in the second before it, %d after it\n",
			k+1, rec.ended, daemonsName(rec.replica), before, after)
		ended += rec.ended
	}
	if len(h.cutLog) > 0 && ended == 0 {
		bad("the %d cuts ended no connection of the daemons", len(h.cutLog))
	}
	if len(h.cutLog) > 0 && mid == 0 {
		bad("none of the %d cuts landed while watches were settling", len(h.cutLog))
	}
}

// settledBy counts the watches the killed replica settled in the second
// before the kill, from the database.
func (h *harness) settledBy(rec killRecord) (int, error) {
	var n int
	err := h.queryRow(30*time.Second, &n, `SELECT count(*) FROM watches WHERE settled_by = $1 AND settled_at > $2 AND settled_at <= $3`,
		fmt.Sprintf("crash-%d", rec.replica), rec.at.Add(-time.Second).UnixMilli(), rec.at.UnixMilli())
	return n, err
}

// settler returns the replica that settled the watch of message id (and
// sends its first attempt), or -1.
func (h *harness) settler(messageID string) (int, error) {
	var by *string
	err := h.queryRow(5*time.Second, &by, `SELECT w.settled_by FROM messages m JOIN watches w ON w.id = m.watch_id WHERE m.id = $1`, messageID)
	if err != nil || by == nil {
		return -1, err
	}
	i, err := strconv.Atoi(strings.TrimPrefix(*by, "crash-"))
	if err != nil || i < 0 || i >= h.replicas {
		return -1, fmt.Errorf("settled_by %q", *by)
	}
	return i, nil
}
