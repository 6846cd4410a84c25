package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// peer is one way of waiting until an instant. Register returns once the
// peer has acknowledged the wait (durably where the peer is durable).
type peer interface {
	Register(ctx context.Context, i int, at time.Time) error
	// Settled returns when each wait was settled (zero: not yet), reading
	// it from the peer where the peer records it.
	Settled(ctx context.Context) ([]time.Time, error)
	// Pids are the processes besides this one that do the peer's work.
	Pids() []int
	Close()
}

// recorder keeps the instant each wait settled, as its handler saw it.
type recorder struct{ at []atomic.Int64 }

func newRecorder(n int) *recorder { return &recorder{at: make([]atomic.Int64, n)} }

func (r *recorder) mark(i int) {
	if i >= 0 && i < len(r.at) {
		r.at[i].CompareAndSwap(0, time.Now().UnixNano())
	}
}

func (r *recorder) Settled(context.Context) ([]time.Time, error) {
	out := make([]time.Time, len(r.at))
	for i := range r.at {
		if v := r.at[i].Load(); v != 0 {
			out[i] = time.Unix(0, v)
		}
	}
	return out, nil
}

func (*recorder) Pids() []int { return nil }

// naive: one time.AfterFunc per wait, nothing durable.
type naive struct {
	*recorder
	timers []*time.Timer
}

func newNaive(n int) *naive { return &naive{recorder: newRecorder(n), timers: make([]*time.Timer, n)} }

func (p *naive) Register(_ context.Context, i int, at time.Time) error {
	p.timers[i] = time.AfterFunc(time.Until(at), func() { p.mark(i) })
	return nil
}

func (p *naive) Close() {
	for _, t := range p.timers {
		if t != nil {
			t.Stop()
		}
	}
}

// polling: one goroutine per wait that looks at the clock every second.
type polling struct {
	*recorder
	stop chan struct{}
}

func newPolling(n int) *polling { return &polling{recorder: newRecorder(n), stop: make(chan struct{})} }

func (p *polling) Register(_ context.Context, i int, at time.Time) error {
	phase := time.Duration(rand.Int64N(int64(time.Second))) // independent pollers are out of phase
	go func() {
		select {
		case <-p.stop:
			return
		case <-time.After(phase):
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				if !now.Before(at) {
					p.mark(i)
					return
				}
			}
		}
	}()
	return nil
}

func (p *polling) Close() { close(p.stop) }

// inproc: vigil's engine in this process on the SQLite store
// (synchronous=FULL), as bench/core runs it; a wait settles when its
// settlement has committed (the engine's DeliverFunc runs after the commit).
type inproc struct {
	*recorder
	dir    string
	store  *sqlite.Store
	eng    *engine.Engine
	cancel context.CancelFunc
	done   chan error
}

func newInproc(ctx context.Context, n int) (*inproc, error) {
	dir, err := os.MkdirTemp("", "vigil-peers-")
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(ctx, dir+"/vigil.db", &sqlite.Options{Synchronous: "FULL"})
	if err != nil {
		return nil, err
	}
	p := &inproc{recorder: newRecorder(n), dir: dir, store: st, done: make(chan error, 1)}
	l := vigil.DefaultLimits()
	l.MaxActive, l.MaxActivePerRecipient = 10_000_000, 10_000_000
	p.eng = engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Limits: l,
		DeliverFunc: func(_ *vigil.Watch, m *vigil.Message) {
			if i, err := strconv.Atoi(strings.TrimPrefix(m.Recipient, "r")); err == nil {
				p.mark(i)
			}
		}})
	if err := p.eng.Prime(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() { p.done <- p.eng.Run(runCtx) }()
	return p, nil
}

func (p *inproc) Register(ctx context.Context, i int, at time.Time) error {
	_, err := p.eng.Register(ctx, timerReq(i, at))
	return err
}

func (p *inproc) Close() {
	p.cancel()
	<-p.done
	p.store.Close()
	os.RemoveAll(p.dir)
}

// timerReq is wait i as a vigil timer; each wait has its own recipient so
// that waits due at one instant are distinct watches.
func timerReq(i int, at time.Time) vigil.RegisterRequest {
	return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r" + strconv.Itoa(i),
		Predicate: []byte(`{"at":"` + vigil.FormatTime(at) + `"}`)}
}

// served: the real vigil binary (`vigil serve`) over HTTP through the Go
// client. Settlement instants are the watches' settled_at (milliseconds),
// the commit's own clock.
type served struct {
	n    int
	dir  string
	cmd  *exec.Cmd
	c    *client.Client
	hc   *http.Client
	addr string
	// completed is when Settled first saw no pending watch: every
	// settlement committed (settled_at is stamped before the commit).
	completed time.Time
	// completedCPU is the daemon's CPU (usage) at completed.
	completedCPU time.Duration
}

// Completed implements completer.
func (p *served) Completed() time.Time { return p.completed }

// CompletedCPU implements completedCPU.
func (p *served) CompletedCPU() time.Duration { return p.completedCPU }

func newServed(ctx context.Context, n int, bin string) (*served, error) {
	dir, err := os.MkdirTemp("", "vigil-peers-serve-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	dataDir := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir,
		"--max-active", "10000000", "--max-active-per-recipient", "10000000")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &served{n: n, dir: dir, cmd: cmd, addr: addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			p.Close()
			return nil, fmt.Errorf("vigil serve not ready in 30 s (log %s)", logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok, err := daemon.ReadToken(daemon.TokenPath(dataDir))
	if err != nil {
		p.Close()
		return nil, err
	}
	p.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	if p.c, err = client.New(addr, tok, &client.Options{HTTPClient: p.hc}); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *served) Register(ctx context.Context, i int, at time.Time) error {
	req := timerReq(i, at)
	req.Note = strconv.Itoa(i)
	_, err := p.c.Register(ctx, req)
	return err
}

// Settled lists the watches; it answers nothing until none is pending, so
// a caller polling it does not page through every watch each time.
func (p *served) Settled(ctx context.Context) ([]time.Time, error) {
	out := make([]time.Time, p.n)
	page, err := p.c.Watches(ctx, vigil.ListRequest{State: vigil.StatePending, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Watches) > 0 {
		return out, nil
	}
	if p.completed.IsZero() {
		p.completed = time.Now()
		p.completedCPU, _ = usage(p.Pids())
	}
	after := ""
	for {
		page, err := p.c.Watches(ctx, vigil.ListRequest{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, w := range page.Watches {
			if i, err := strconv.Atoi(w.Note); err == nil && i < p.n && w.State.Terminal() {
				out[i] = w.SettledAt
			}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func (p *served) Pids() []int { return []int{p.cmd.Process.Pid} }

func (p *served) Close() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	os.RemoveAll(p.dir)
}

// riverPeer: River on PostgreSQL (riverpgxv5), a fresh schema migrated with
// rivermigrate, default client settings but for MaxWorkers.
type riverPeer struct {
	*recorder
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	schema string
}

type waitArgs struct {
	I int `json:"i"`
}

func (waitArgs) Kind() string { return "wait" }

type waitWorker struct {
	river.WorkerDefaults[waitArgs]
	rec *recorder
}

func (w *waitWorker) Work(_ context.Context, j *river.Job[waitArgs]) error {
	w.rec.mark(j.Args.I)
	return nil
}

func newRiver(ctx context.Context, n int, url string) (*riverPeer, error) {
	schema := fmt.Sprintf("bench_river_%d", time.Now().UnixNano())
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		return nil, err
	}
	p := &riverPeer{recorder: newRecorder(n), pool: pool, schema: schema}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		p.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		p.Close()
		return nil, fmt.Errorf("rivermigrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &waitWorker{rec: p.recorder})
	p.client, err = river.NewClient(driver, &river.Config{Schema: schema, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}})
	if err != nil {
		p.Close()
		return nil, err
	}
	if err := p.client.Start(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *riverPeer) Register(ctx context.Context, i int, at time.Time) error {
	_, err := p.client.Insert(ctx, waitArgs{I: i}, &river.InsertOpts{ScheduledAt: at})
	return err
}

// Pids are the PostgreSQL server's processes (backends and helpers).
func (p *riverPeer) Pids() []int { return procsNamed("postgres") }

func (p *riverPeer) Close() {
	if p.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = p.client.Stop(ctx)
		cancel()
	}
	_, _ = p.pool.Exec(context.Background(), "DROP SCHEMA "+p.schema+" CASCADE")
	p.pool.Close()
}

// asynqPeer: asynq on the local Redis (persistence off), default server
// settings but for Concurrency; its own Redis database, flushed.
type asynqPeer struct {
	*recorder
	opt    asynq.RedisClientOpt
	client *asynq.Client
	server *asynq.Server
}

const asynqDB = 7

func newAsynq(n int, addr string) (*asynqPeer, error) {
	opt := asynq.RedisClientOpt{Addr: addr, DB: asynqDB, PoolSize: 64}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: asynqDB})
	err := rdb.FlushDB(context.Background()).Err()
	rdb.Close()
	if err != nil {
		return nil, err
	}
	p := &asynqPeer{recorder: newRecorder(n), opt: opt, client: asynq.NewClient(opt)}
	p.server = asynq.NewServer(opt, asynq.Config{Concurrency: 100, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("wait", func(_ context.Context, t *asynq.Task) error {
		var a waitArgs
		if err := json.Unmarshal(t.Payload(), &a); err != nil {
			return err
		}
		p.mark(a.I)
		return nil
	})
	if err := p.server.Start(mux); err != nil {
		p.client.Close()
		return nil, err
	}
	return p, nil
}

func (p *asynqPeer) Register(ctx context.Context, i int, at time.Time) error {
	b, _ := json.Marshal(waitArgs{I: i})
	_, err := p.client.EnqueueContext(ctx, asynq.NewTask("wait", b), asynq.ProcessAt(at))
	return err
}

func (p *asynqPeer) Pids() []int { return procsNamed("redis-server") }

func (p *asynqPeer) Close() {
	p.server.Shutdown()
	p.client.Close()
	rdb := redis.NewClient(&redis.Options{Addr: p.opt.Addr, DB: asynqDB})
	_ = rdb.FlushDB(context.Background()).Err()
	rdb.Close()
}

// procsNamed lists the processes whose comm is name.
func procsNamed(name string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == name {
			out = append(out, pid)
		}
	}
	return out
}
