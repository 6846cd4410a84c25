package main

// The pg-* scenarios: vigil on its PostgreSQL store as N real
// `vigil serve --store postgres://…` processes (each with its own data dir
// and port, all on one database), side by side with River on the same
// PostgreSQL server in one run. Each peer gets a database of its own, made
// for the run and dropped after it, so neither sees the other's rows and
// PostgreSQL's per-database counters (pg_stat_database) and backends
// (pg_stat_activity) are each peer's alone.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
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
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

var (
	vigilBin = flag.String("vigil-bin", "", "the vigil binary to run as vigild and as the PostgreSQL replicas (empty: build ./cmd/vigil of the repository this module uses, e.g. go build -o /tmp/vigil ./cmd/vigil in another worktree, then -vigil-bin /tmp/vigil)")
	pgPeers  = flag.String("pg-peers", "vigil1,vigil3,river", "pg-* scenarios: what runs side by side: vigilN (N `vigil serve --store postgres://…` replicas on one database) and river")
	pgConc   = flag.Int("pg-conc", 32, "pg-register: clients registering one watch per call, spread round-robin over the replicas that serve")
	pgBatch  = flag.Int("pg-batch", 200, "pg-register, pg-idle, pg-storm: waits per batch call (vigil: POST /v1/watches/batch, one transaction, which must end within the client's 30 s; River: InsertManyFast)")
	pgBatchC = flag.Int("pg-batch-conc", 1, "pg-register, pg-idle, pg-storm: clients registering batches of -pg-batch, spread round-robin over the replicas that serve (above 1, vigil's concurrent batches deadlock on the pending counters and run again)")
	pgPool   = flag.Int("pg-pool", 0, "pg-*: each replica's connection pool (pool_max_conns in its store URL; 0: vigil's default, max(4, GOMAXPROCS))")
	pgSeed   = flag.String("pg-seed", "one", "pg-storm, pg-idle: how vigil's waits are registered before the scenario: one (one per call from -pg-conc clients) or batch (calls of -pg-batch from -pg-batch-conc clients, quicker on a loaded machine)")
	pgSettle = flag.Duration("pg-settle", 2*time.Second, "pg-*: pause after every replica answers, before the scenario starts (shard leases to spread)")
)

// pgConfig is what the pg-* scenarios take from main's flags.
type pgConfig struct {
	bin   string
	admin string // the -postgres URL: where databases are made and stats read
	runs  int
	n     int
	lead  time.Duration
	idle  time.Duration
}

// pgPeer is a peer with a database of its own on the shared server.
type pgPeer interface {
	peer
	batcher
	// Database is the name of the peer's database.
	Database() string
	// Replicas are the vigil daemons' processes (none for River, which
	// runs in this process).
	Replicas() []int
	// Label says how the peer ran: replicas started and serving.
	Label() string
}

// runPG runs one pg-* scenario for every peer of -pg-peers, -runs times
// each, and prints the lines as the other scenarios do. It reports whether
// sc is a pg-* scenario.
func runPG(ctx context.Context, sc string, cfg pgConfig) (bool, error) {
	var do func(context.Context, *pgAdmin, pgPeer, int) ([]result, error)
	var n int
	switch sc {
	case "pg-idle":
		n = cmpOr(cfg.n, 100_000)
		do = func(ctx context.Context, a *pgAdmin, p pgPeer, n int) ([]result, error) {
			return pgIdle(ctx, a, p, n, *pgBatch, cfg.idle)
		}
	case "pg-register":
		n = cmpOr(cfg.n, 10_000)
		do = func(ctx context.Context, a *pgAdmin, p pgPeer, n int) ([]result, error) {
			return pgRegister(ctx, a, p, n, *pgBatch)
		}
	case "pg-storm":
		n = cmpOr(cfg.n, 20_000)
		do = func(ctx context.Context, a *pgAdmin, p pgPeer, n int) ([]result, error) {
			return pgStorm(ctx, a, p, n, *pgBatch, cfg.lead)
		}
	default:
		return false, nil
	}
	a, err := newPGAdmin(ctx, cfg.admin)
	if err != nil {
		return true, err
	}
	defer a.Close()
	for _, name := range strings.Split(*pgPeers, ",") {
		var lines []result
		for range cfg.runs {
			p, err := a.open(ctx, name, n, cfg.bin)
			if err != nil {
				return true, fmt.Errorf("%s %s: %w", sc, name, err)
			}
			log.Printf("%s %s: %s", sc, name, p.Label())
			res, err := do(ctx, a, p, n)
			p.Close()
			if err != nil {
				return true, fmt.Errorf("%s %s: %w", sc, name, err)
			}
			lines = append(lines, res...)
		}
		report(sc, name, lines)
	}
	return true, nil
}

// pgAdmin is a connection to the -postgres database, which makes and drops
// the peers' databases and reads the server's statistics.
type pgAdmin struct {
	url  string
	pool *pgxpool.Pool
}

func newPGAdmin(ctx context.Context, u string) (*pgAdmin, error) {
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", u, err)
	}
	return &pgAdmin{url: u, pool: pool}, nil
}

func (a *pgAdmin) Close() { a.pool.Close() }

// createDB makes a database named prefix_<nanoseconds> and returns its name
// and a URL of it with the admin URL's user, host and parameters, and drop.
func (a *pgAdmin) createDB(ctx context.Context, prefix string) (string, string, func(), error) {
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := a.pool.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", nil, fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(a.url)
	if err != nil {
		return "", "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			log.Printf("drop database %s: %v", name, err)
		}
	}
	return name, u.String(), drop, nil
}

// open starts the peer name ("river" or "vigilN") in a database of its own.
func (a *pgAdmin) open(ctx context.Context, name string, n int, bin string) (pgPeer, error) {
	if name == "river" {
		db, u, drop, err := a.createDB(ctx, "bench_river")
		if err != nil {
			return nil, err
		}
		p, err := newRiver(ctx, n, u)
		if err != nil {
			drop()
			return nil, err
		}
		return &riverPG{riverPeer: p, db: db, drop: drop}, nil
	}
	k, err := strconv.Atoi(strings.TrimPrefix(name, "vigil"))
	if !strings.HasPrefix(name, "vigil") || err != nil || k < 1 || k > 16 {
		return nil, fmt.Errorf("unknown pg peer %q: river or vigilN (N replicas, 1 to 16)", name)
	}
	db, u, drop, err := a.createDB(ctx, "bench_vigil")
	if err != nil {
		return nil, err
	}
	c, err := newCluster(ctx, n, k, bin, db, u)
	if err != nil {
		drop()
		return nil, err
	}
	c.drop = drop
	return c, nil
}

// riverPG is River (riverPeer) in a database of its own.
type riverPG struct {
	*riverPeer
	db   string
	drop func()
}

func (p *riverPG) Database() string { return p.db }
func (p *riverPG) Replicas() []int  { return nil }
func (p *riverPG) Label() string    { return "River in this process, database " + p.db }
func (p *riverPG) Close() {
	p.riverPeer.Close()
	p.drop()
}

// cluster is k real `vigil serve` processes on one PostgreSQL database,
// each with its own data dir, port and admin token. Calls go round-robin to
// the replicas that serve: today a database has one active daemon and the
// others stand by (GET /v1/daemon says role "standby", the API answers
// 503) until it stops; with shards every replica serves.
type cluster struct {
	n      int
	dir    string
	db     string
	drop   func()
	reps   []*replica
	active []*replica
	rr     atomic.Uint64
	// completed is when Settled first saw no pending watch; onComplete,
	// if set, runs then (pg-storm's CPU snapshot).
	completed  time.Time
	onComplete func()
}

type replica struct {
	addr string
	cmd  *exec.Cmd
	log  string
	c    *client.Client
	tok  string
	info daemonInfo
}

// daemonInfo is what GET /v1/daemon says, read as JSON rather than through
// client.DaemonInfo so that a binary from another tree (-vigil-bin) may
// say more: with shards, which it holds and how many there are.
type daemonInfo struct {
	Replica    string `json:"replica"`
	Role       string `json:"role"`
	Shards     []int  `json:"shards"`
	ShardCount int    `json:"shard_count"`
}

// daemon reads GET /v1/daemon.
func (r *replica) daemon(ctx context.Context, hc *http.Client) (daemonInfo, error) {
	var out daemonInfo
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/v1/daemon", nil)
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+r.tok)
	resp, err := hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /v1/daemon: %s", resp.Status)
	}
	return out, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
}

// serves reports whether the replica takes calls: not a standby, not
// starting.
func (i daemonInfo) serves() bool { return i.Role != "standby" && i.Role != "starting" && i.Role != "" }

var _ pgPeer = (*cluster)(nil)

func newCluster(ctx context.Context, n, k int, bin, db, dbURL string) (*cluster, error) {
	dir, err := os.MkdirTemp("", "vigil-peers-pg-")
	if err != nil {
		return nil, err
	}
	c := &cluster{n: n, dir: dir, db: db}
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	if *pgPool > 0 {
		q := u.Query()
		q.Set("pool_max_conns", strconv.Itoa(*pgPool))
		u.RawQuery = q.Encode()
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range k {
		r, err := startReplica(filepath.Join(dir, fmt.Sprintf("r%d", i)), bin, u.String())
		if err != nil {
			c.Close()
			return nil, err
		}
		c.reps = append(c.reps, r)
	}
	// Every replica answers GET /v1/daemon with a role other than
	// "starting" (standbys answer it too), then the serving ones are those
	// that are not standbys and answer a list.
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range c.reps {
		for {
			if r.c == nil {
				if tok, err := daemon.ReadToken(daemon.TokenPath(filepath.Join(filepath.Dir(r.log), "data"))); err == nil {
					r.tok = tok
					r.c, err = client.New(r.addr, tok, &client.Options{HTTPClient: hc})
					if err != nil {
						c.Close()
						return nil, err
					}
				}
			}
			if r.c != nil {
				info, err := r.daemon(ctx, hc)
				if err == nil && info.Role != "starting" {
					r.info = info
					break
				}
			}
			if exited(r.cmd.Process.Pid) || time.Now().After(deadline) {
				c.Close()
				return nil, fmt.Errorf("replica %s not up in 60 s (log %s)", r.addr, r.log)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.balance(ctx, hc)
	time.Sleep(*pgSettle)
	for _, r := range c.reps {
		info, err := r.daemon(ctx, hc)
		if err != nil {
			continue
		}
		r.info = info
		if info.serves() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = r.c.Watches(cctx, vigil.ListRequest{Limit: 1})
			cancel()
			if err == nil {
				c.active = append(c.active, r)
			}
		}
	}
	if len(c.active) == 0 {
		c.Close()
		return nil, fmt.Errorf("none of %d replicas serves (logs under %s)", k, dir)
	}
	return c, nil
}

// balance waits, up to a minute, until the replicas that serve hold every
// shard between them, each at least one, and the split has not changed for
// 2 s: at once when the replicas say nothing of shards (one active daemon
// and standbys).
func (c *cluster) balance(ctx context.Context, hc *http.Client) {
	deadline := time.Now().Add(time.Minute)
	last, since := "", time.Now()
	for {
		total, count, least, serving := 0, 0, -1, 0
		var split []string
		for _, r := range c.reps {
			info, err := r.daemon(ctx, hc)
			if err != nil || !info.serves() {
				continue
			}
			serving++
			total += len(info.Shards)
			count = max(count, info.ShardCount)
			if least < 0 || len(info.Shards) < least {
				least = len(info.Shards)
			}
			split = append(split, strconv.Itoa(len(info.Shards)))
		}
		if count == 0 {
			return
		}
		if sig := strings.Join(split, ","); sig != last {
			last, since = sig, time.Now()
		}
		if serving > 0 && total == count && least >= 1 && time.Since(since) >= 2*time.Second {
			return
		}
		if time.Now().After(deadline) {
			log.Printf("shards not settled after a minute: %d of %d held, split %s", total, count, last)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replicaKeys are the signing keys every replica is given, by file name
// in its data dir: the webhook secret and the link key (benchmark keys,
// never used outside this harness).
var replicaKeys = map[string]string{
	"webhook.secret": "whsec_YmVuY2gtcGVlcnMtcmVwbGljYXMtc2hhcmUtb25lLXNlY3JldA==",
	"link.key":       "YmVuY2gtcGVlcnMtcmVwbGljYXMtc2hhcmUtb25lLWxpbmsta2V5IQ==",
}

// startReplica starts `vigil serve` on a free loopback port with its data
// dir under dir and the store at storeURL.
func startReplica(dir, bin, storeURL string) (*replica, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Every replica of a database signs with the same keys
	// (docs/operations.md, Running replicas): one with other keys
	// refuses to start.
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	for name, text := range replicaKeys {
		if err := os.WriteFile(filepath.Join(data, name), []byte(text+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	// The replicas share their settings, roots included (each one's HOME
	// is its own directory, the default root): a replica whose settings
	// differ from a live one's is refused at start.
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", data, "--store", storeURL,
		"--max-active", "10000000", "--max-active-per-recipient", "10000000", "--roots", filepath.Dir(dir))
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	// A replica dies with the harness (interrupted, or failed before
	// Close), never left serving on the database.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{addr: addr, cmd: cmd, log: logf.Name()}
	go func() { _ = cmd.Wait() }()
	return r, nil
}

func (c *cluster) Database() string { return c.db }

// Label says how many replicas were started and how many serve.
func (c *cluster) Label() string {
	var roles []string
	for _, r := range c.reps {
		role := r.info.Role
		if r.info.ShardCount > 0 {
			role += fmt.Sprintf(" %d/%d shards", len(r.info.Shards), r.info.ShardCount)
		}
		roles = append(roles, role)
	}
	return fmt.Sprintf("%d replicas started, %d serving (%s), database %s",
		len(c.reps), len(c.active), strings.Join(roles, "; "), c.db)
}

// next is the serving replica the next call goes to.
func (c *cluster) next() *replica {
	return c.active[int(c.rr.Add(1)-1)%len(c.active)]
}

func (c *cluster) Register(ctx context.Context, i int, at time.Time) error {
	req := timerReq(i, at)
	req.Note = strconv.Itoa(i)
	_, err := c.active[i%len(c.active)].c.Register(ctx, req)
	return err
}

// RegisterBatch implements batcher: one POST /v1/watches/batch to the
// next serving replica.
func (c *cluster) RegisterBatch(ctx context.Context, from int, ats []time.Time) error {
	reqs := make([]vigil.RegisterRequest, len(ats))
	for j, at := range ats {
		reqs[j] = timerReq(from+j, at)
		reqs[j].Note = strconv.Itoa(from + j)
	}
	res, err := c.next().c.RegisterBatch(ctx, reqs)
	return batchErr(res, err)
}

// Settled reads the shared database through one serving replica; it
// answers nothing until none is pending, as served.Settled does.
func (c *cluster) Settled(ctx context.Context) ([]time.Time, error) {
	out := make([]time.Time, c.n)
	cl := c.active[0].c
	page, err := cl.Watches(ctx, vigil.ListRequest{State: vigil.StatePending, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Watches) > 0 {
		return out, nil
	}
	if c.completed.IsZero() {
		c.completed = time.Now()
		if c.onComplete != nil {
			c.onComplete()
		}
	}
	after := ""
	for {
		page, err := cl.Watches(ctx, vigil.ListRequest{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, w := range page.Watches {
			if i, err := strconv.Atoi(w.Note); err == nil && i < c.n && w.State.Terminal() {
				out[i] = w.SettledAt
			}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// Completed implements completer.
func (c *cluster) Completed() time.Time { return c.completed }

func (c *cluster) Pids() []int { return c.Replicas() }
func (c *cluster) Replicas() []int {
	var out []int
	for _, r := range c.reps {
		out = append(out, r.cmd.Process.Pid)
	}
	return out
}

// settlements is vigil_settlements_total of each replica, from /metrics
// (-1 where it cannot be read).
func (c *cluster) settlements(ctx context.Context) []float64 {
	out := make([]float64, len(c.reps))
	for i, r := range c.reps {
		out[i] = -1
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/metrics", nil)
		if err != nil {
			continue
		}
		req.Header.Set("Authorization", "Bearer "+r.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		out[i] = 0
		if f := fams["vigil_settlements_total"]; f != nil {
			for _, m := range f.GetMetric() {
				out[i] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// Close stops every replica (SIGTERM, then SIGKILL after 20 s), removes
// their directories and drops the database.
func (c *cluster) Close() {
	for _, r := range c.reps {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range c.reps {
		deadline := time.Now().Add(20 * time.Second)
		for !exited(r.cmd.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = r.cmd.Process.Kill()
	}
	os.RemoveAll(c.dir)
	if c.drop != nil {
		c.drop()
	}
}

// exited reports whether pid is gone or a zombie.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// registerBatches registers waits [0, n) in calls of size from conc
// goroutines, wait i due at at(i); it returns the elapsed time and each
// call's latency.
func registerBatches(ctx context.Context, b batcher, n, size, conc int, at func(int) time.Time) (time.Duration, []time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for range conc {
		wg.Go(func() {
			ats := make([]time.Time, size)
			for {
				from := int(next.Add(int64(size))) - size
				if from >= n || first.Load() != nil {
					return
				}
				k := min(size, n-from)
				for j := range k {
					ats[j] = at(from + j)
				}
				t := time.Now()
				if err := b.RegisterBatch(ctx, from, ats[:k]); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, nil, *e
	}
	return time.Since(start), lat, nil
}

// seed registers waits [0, n), wait i due at at(i), each peer its fastest
// way on this store: vigil one per call from -pg-conc clients over the
// replicas that serve (its batch call is slower on PostgreSQL: see
// pg-register; -pg-seed batch: in batches), River in batches of size
// (InsertManyFast).
func seed(ctx context.Context, p pgPeer, n, size int, at func(int) time.Time) error {
	if _, ok := p.(*cluster); ok && *pgSeed != "batch" {
		_, _, err := registerAll(ctx, p, n, *pgConc, at)
		return err
	}
	_, _, err := registerBatches(ctx, p, n, size, *pgBatchC, at)
	return err
}

// pgSnap is what the server and the peer's processes have spent so far.
type pgSnap struct {
	at time.Time
	// self is this process's CPU (River runs here), replicas the vigil
	// daemons' threads' run time, replicasTicks their utime+stime, and
	// written their write_bytes.
	self, replicas, replicasTicks time.Duration
	written                       int64
	// backends is the run time of each PostgreSQL backend connected to
	// the peer's database; allPG that of every postgres process (the
	// server's helpers, and other databases' backends: not the peer's
	// alone on a shared machine).
	backends map[int]time.Duration
	allPG    time.Duration
	// The peer's database (pg_stat_database) and the whole server
	// (pg_stat_wal, pg_stat_bgwriter).
	xactCommit, tupWritten, blksTouched int64
	walBytes, walRecords, bufWritten    int64
}

// snap reads the processes' counters now and, after flush, PostgreSQL's
// statistics: a backend that has gone idle reports its pending counts only
// up to 10 s later (PGSTAT_IDLE_INTERVAL), so a figure read at once would
// miss the last seconds' transactions. The peer should be quiet during the
// pause.
// quiet waits until no client backend of the peer's database has been
// running a statement for 3 s (polled every 500 ms), for at most 10 minutes.
func (a *pgAdmin) quiet(ctx context.Context, p pgPeer) error {
	const poll, still, most = 500 * time.Millisecond, 6, 10 * time.Minute
	end := time.Now().Add(most)
	for n := 0; n < still; {
		var active int
		err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend'`, p.Database()).Scan(&active)
		if err != nil {
			return err
		}
		if active > 0 {
			n = 0
		} else {
			n++
		}
		if time.Now().After(end) {
			return fmt.Errorf("the peer's database was still busy %s after its waits were registered", most)
		}
		time.Sleep(poll)
	}
	return nil
}

func (a *pgAdmin) snap(ctx context.Context, p pgPeer, flush time.Duration) (pgSnap, error) {
	s := pgSnap{at: time.Now(), self: selfCPU(), backends: map[int]time.Duration{}}
	for _, pid := range p.Replicas() {
		run, ticks, wr := procCPU(pid)
		s.replicas += run
		s.replicasTicks += ticks
		s.written += wr
	}
	rows, err := a.pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", p.Database())
	if err != nil {
		return s, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		run, _, _ := procCPU(int(pid))
		s.backends[int(pid)] = run
	}
	for _, pid := range procsNamed("postgres") {
		run, _, _ := procCPU(pid)
		s.allPG += run
	}
	time.Sleep(flush)
	if _, err := a.pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return s, err
	}
	err = a.pool.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, blks_read + blks_hit
		FROM pg_stat_database WHERE datname = $1`, p.Database()).Scan(&s.xactCommit, &s.tupWritten, &s.blksTouched)
	if err != nil {
		return s, fmt.Errorf("pg_stat_database: %w", err)
	}
	err = a.pool.QueryRow(ctx, `SELECT w.wal_bytes::bigint, w.wal_records, b.buffers_checkpoint + b.buffers_clean + b.buffers_backend
		FROM pg_stat_wal w, pg_stat_bgwriter b`).Scan(&s.walBytes, &s.walRecords, &s.bufWritten)
	if err != nil {
		return s, fmt.Errorf("pg_stat_wal: %w", err)
	}
	return s, nil
}

// statsFlush is how long snap waits for idle backends to report.
const statsFlush = 11 * time.Second

// backendCPU is what the peer's backends ran between s0 and s1: a backend
// there at both counts its difference, one that came after s0 all of its
// run time (one that left before s1 is missed).
func backendCPU(s0, s1 pgSnap) time.Duration {
	var d time.Duration
	for pid, run := range s1.backends {
		d += run - s0.backends[pid]
	}
	return d
}

// procCPU is pid's threads' run time (/proc/PID/task/*/schedstat, ns), its
// utime+stime (/proc/PID/stat, 10 ms ticks) and its write_bytes; zeros for
// a process that has gone.
func procCPU(pid int) (time.Duration, time.Duration, int64) {
	ticks, wr := usage([]int{pid})
	var run time.Duration
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			run += time.Duration(ns)
		}
	}
	return run, ticks, wr
}

// pgIdle: n waits due a day from now and later (registered by seed),
// a quiet pause, then over d: the replicas' CPU (River: this process's),
// the peer's PostgreSQL backends' CPU, transactions committed and rows
// written in its database, and the server's WAL and buffer writes.
func pgIdle(ctx context.Context, a *pgAdmin, p pgPeer, n, size int, d time.Duration) ([]result, error) {
	// A day ahead: registering n can take long on a loaded machine, and
	// a window that the first waits fall due in measures a storm.
	at := time.Now().Add(24 * time.Hour)
	if err := seed(ctx, p, n, size, func(i int) time.Time { return at.Add(time.Duration(i) * time.Millisecond) }); err != nil {
		return nil, err
	}
	// Let the registration's aftermath settle: the shard holders read the
	// watches other replicas registered (a backlog that ran for over a
	// minute after 100 000 in batches, and counted as idle).
	seeded := time.Now()
	if err := a.quiet(ctx, p); err != nil {
		return nil, err
	}
	log.Printf("pg-idle %s: its database went quiet %s after the waits were registered", p.Database(), time.Since(seeded).Round(time.Second))
	time.Sleep(10 * time.Second)
	s0, err := a.snap(ctx, p, statsFlush)
	if err != nil {
		return nil, err
	}
	time.Sleep(d - statsFlush)
	s1, err := a.snap(ctx, p, statsFlush)
	if err != nil {
		return nil, err
	}
	if !time.Now().Before(at) {
		return nil, fmt.Errorf("the first waits fell due (%s) before the window ended: registering took too long", vigil.FormatTime(at))
	}
	perMin := func(v float64) float64 { return v * float64(time.Minute) / float64(s1.at.Sub(s0.at)) }
	msPerMin := func(x time.Duration) float64 { return perMin(ms(x)) }
	return []result{{label: fmt.Sprintf("n=%d %s", n, shortLabel(p)), values: map[string]float64{
		"replicas_cpu_ms_min":       msPerMin(s1.replicas - s0.replicas),
		"replicas_ticks_ms_min":     msPerMin(s1.replicasTicks - s0.replicasTicks),
		"replicas_written_kib":      float64(s1.written-s0.written) / 1024,
		"this_cpu_ms_min":           msPerMin(s1.self - s0.self),
		"pg_backends_cpu_ms_min":    msPerMin(backendCPU(s0, s1)),
		"pg_all_cpu_ms_min":         msPerMin(s1.allPG - s0.allPG),
		"pg_xact_commit_min":        perMin(float64(s1.xactCommit - s0.xactCommit)),
		"pg_tup_written_min":        perMin(float64(s1.tupWritten - s0.tupWritten)),
		"pg_blks_touched_min":       perMin(float64(s1.blksTouched - s0.blksTouched)),
		"server_wal_kib_min":        perMin(float64(s1.walBytes-s0.walBytes) / 1024),
		"server_wal_records_min":    perMin(float64(s1.walRecords - s0.walRecords)),
		"server_bufs_written_min":   perMin(float64(s1.bufWritten - s0.bufWritten)),
		"pg_backends_at_end":        float64(len(s1.backends)),
		"idle_window_s":             s1.at.Sub(s0.at).Seconds(),
		"replicas_processes":        float64(len(p.Replicas())),
		"replicas_serving_at_start": float64(serving(p)),
	}}}, nil
}

// serving is how many replicas take calls (1 for River).
func serving(p pgPeer) int {
	if c, ok := p.(*cluster); ok {
		return len(c.active)
	}
	return 1
}

func shortLabel(p pgPeer) string {
	if c, ok := p.(*cluster); ok {
		return fmt.Sprintf("replicas=%d serving=%d", len(c.reps), len(c.active))
	}
	return "in-process"
}

// pgRegister: n waits due in an hour registered one per call from -pg-conc
// clients (vigil: POST /v1/watches round-robin over the serving replicas;
// River: Insert), then n more in batches of size from -pg-batch-conc
// clients (vigil: POST /v1/watches/batch; River: InsertMany), in the same
// database: throughput, latency, and CPU per wait of the replicas, this
// process and the peer's PostgreSQL backends.
func pgRegister(ctx context.Context, a *pgAdmin, p pgPeer, n, size int) ([]result, error) {
	at := time.Now().Add(time.Hour)
	due := func(i int) time.Time { return at.Add(time.Duration(i) * time.Millisecond) }
	figures := func(s0, s1 pgSnap, count int, el time.Duration, lat []time.Duration) map[string]float64 {
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(count) }
		return map[string]float64{
			"per_s":                 float64(count) / el.Seconds(),
			"p50_ms":                ms(quantile(lat, 0.5)),
			"p99_ms":                ms(quantile(lat, 0.99)),
			"replicas_cpu_us":       us(s1.replicas - s0.replicas),
			"this_cpu_us":           us(s1.self - s0.self),
			"pg_backends_cpu_us":    us(backendCPU(s0, s1)),
			"pg_xact_per_wait":      float64(s1.xactCommit-s0.xactCommit) / float64(count),
			"server_wal_b_per_wait": float64(s1.walBytes-s0.walBytes) / float64(count),
		}
	}
	s0, err := a.snap(ctx, p, statsFlush)
	if err != nil {
		return nil, err
	}
	lat, el, err := registerAll(ctx, p, n, *pgConc, due)
	if err != nil {
		return nil, err
	}
	s1, err := a.snap(ctx, p, statsFlush)
	if err != nil {
		return nil, err
	}
	out := []result{{label: fmt.Sprintf("one conc=%d n=%d %s", *pgConc, n, shortLabel(p)), values: figures(s0, s1, n, el, lat)}}
	shifted := func(i int) time.Time { return due(n + i) }
	el, blat, err := registerBatches(ctx, shiftBatcher{p, n}, n, size, *pgBatchC, shifted)
	if err != nil {
		return nil, err
	}
	s2, err := a.snap(ctx, p, statsFlush)
	if err != nil {
		return nil, err
	}
	out = append(out, result{label: fmt.Sprintf("batch=%d conc=%d n=%d %s", size, *pgBatchC, n, shortLabel(p)), values: figures(s1, s2, n, el, blat)})
	return out, nil
}

// shiftBatcher numbers waits from off, so a second round of waits does
// not take the first round's identities.
type shiftBatcher struct {
	b   batcher
	off int
}

func (s shiftBatcher) RegisterBatch(ctx context.Context, from int, ats []time.Time) error {
	return s.b.RegisterBatch(ctx, s.off+from, ats)
}

// pgStorm: n waits due at one instant T, registered by seed ahead of it;
// from T until every one has settled (vigil: the client first sees none
// pending, every settlement committed; River: the last Work ran), each
// one's lateness, how many settled before T (must be 0), the CPU per wait
// of the replicas, the peer's PostgreSQL backends and this process from
// just before T until then, and, for vigil, how the settlements spread
// over the replicas (vigil_settlements_total).
func pgStorm(ctx context.Context, a *pgAdmin, p pgPeer, n, size int, lead time.Duration) ([]result, error) {
	at := time.Now().Add(lead).Truncate(time.Millisecond)
	c, _ := p.(*cluster)
	var before []float64
	if c != nil {
		before = c.settlements(ctx)
	}
	if err := seed(ctx, p, n, size, func(int) time.Time { return at }); err != nil {
		return nil, err
	}
	if time.Until(at) < time.Second {
		return nil, fmt.Errorf("registration ended %v before the instant: raise -lead", time.Until(at))
	}
	// The CPU spent from just before T until every wait has settled (for
	// vigil: when the client first sees none pending), per wait: it holds
	// on a loaded machine, where the wall time does not.
	time.Sleep(time.Until(at) - 300*time.Millisecond)
	s0, err := a.snap(ctx, p, 0)
	if err != nil {
		return nil, err
	}
	var s1 pgSnap
	var s1err error
	if c != nil {
		c.onComplete = func() { s1, s1err = a.snap(ctx, p, 0) }
	}
	got, err := waitSettled(ctx, p, n, at.Add(3*time.Minute))
	if err != nil {
		return nil, err
	}
	if c == nil {
		s1, s1err = a.snap(ctx, p, 0)
	}
	if s1err != nil {
		return nil, s1err
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	late := make([]time.Duration, n)
	early := 0
	for i, t := range got {
		late[i] = t.Sub(at)
		if late[i] < 0 {
			early++
		}
	}
	all := slices.Max(late)
	if cp, ok := p.(completer); ok {
		all = cp.Completed().Sub(at)
	}
	v := map[string]float64{
		"all_settled_ms": ms(all),
		"late_p50_ms":    ms(quantile(late, 0.5)),
		"late_p99_ms":    ms(quantile(late, 0.99)),
		"late_min_ms":    ms(slices.Min(late)),
		"late_max_ms":    ms(slices.Max(late)),
		"early":          float64(early),
		// This process's CPU is River's work for River, the client's
		// polling for vigil.
		"replicas_cpu_us":    us(s1.replicas - s0.replicas),
		"pg_backends_cpu_us": us(backendCPU(s0, s1)),
		"this_cpu_us":        us(s1.self - s0.self),
		"cpu_us":             us(s1.replicas - s0.replicas + backendCPU(s0, s1) + s1.self - s0.self),
	}
	if c != nil {
		after := c.settlements(ctx)
		settled := 0
		most := 0.0
		for i := range after {
			d := after[i] - before[i]
			if before[i] < 0 || after[i] < 0 {
				return nil, errors.New("a replica's /metrics could not be read")
			}
			if d > 0 {
				settled++
			}
			most = max(most, d)
		}
		v["replicas_that_settled"] = float64(settled)
		v["most_by_one_replica"] = most
	}
	return []result{{label: fmt.Sprintf("n=%d %s", n, shortLabel(p)), values: v}}, nil
}
