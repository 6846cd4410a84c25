// Package daemon is vigil's composition root: the configuration (defaults,
// one loader over flags, VIGIL_… environment variables and a JSON file, and
// validation) and the Daemon, which wires the SQLite store, the watcher
// registry, the engine and the HTTP API together and runs them until its
// context ends.
//
// A daemon keeps its state in its data directory (mode 0700): the database
// vigil.db (0600, as are its WAL and shared-memory files); admin.token, the
// admin's bearer token (0600), written on the first start and reused after;
// webhook.secret and link.key (0600), the keys that sign webhooks and
// unsubscribe links, the same on every replica of a PostgreSQL database (a
// replica whose keys differ from the live replicas' refuses to start:
// checkKeys); vigil.lock, locked by the running daemon so that no
// second one serves the same directory; run/, where the supervisors of run
// watches record how their commands ended (see package watcher/run); and
// folder/, the previous contents of the files folder watches diff against
// (see package watcher/folder).
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/metrics"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
	"github.com/vigil-run/vigil/watcher/run"
	"github.com/vigil-run/vigil/web"
)

// Timeouts of the HTTP server and of shutdown.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// shutdownTimeout bounds how long shutdown waits for requests in
	// flight (long-polls and streams are ended at once).
	shutdownTimeout = 10 * time.Second
	// deliveryGrace is how long, once the engine stops, the push delivery
	// attempts in flight go on to finish and record their results before
	// they are cut short (deliver.Config.StopGrace): the whole timeout of
	// a webhook attempt (webhook.DefaultTimeout), so that a webhook in
	// flight ends by its own answer or timeout and never because of a
	// routine restart; and never more than shutdownTimeout, so that a
	// shutdown (requests, then deliveries, each at most that long, then
	// the final receipt writes and, on PostgreSQL, the lease's leave)
	// stays well inside what a supervisor gives before its SIGKILL (30 s
	// by default on Kubernetes, 90 s under systemd).
	deliveryGrace = min(webhook.DefaultTimeout, shutdownTimeout)
)

// Daemon is one running vigil: store, engine and HTTP API. Make it with
// New, then call Run once.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	token string
	store vigil.Store
	// shards holds this replica's share of the shards of a PostgreSQL
	// database and hears of the other replicas' changes; nil on SQLite,
	// which the data directory's lock keeps to one daemon.
	shards *shards
	// pgEvents, on PostgreSQL, announces what other daemons commit.
	pgEvents *pgEvents
	// replica is this daemon's id (ReplicaID).
	replica string
	// lock is held on the data directory from New to Close; dbLock on a
	// SQLite database outside it (sqlite:PATH), nil otherwise.
	lock, dbLock *dirLock
	eng          *engine.Engine
	// sched decides when each watch's turn comes; the engine probes.
	sched *scheduler.Scheduler
	api   *httpapi.Server
	srv   *http.Server
	ln    net.Listener
	kinds []vigil.Kind
	// watchers are the registered watchers: those with work in the
	// background (watcher.Runner) run alongside the engine, those that
	// hold connections (io.Closer) are closed with the daemon.
	watchers []watcher.Watcher
	// forges are the clients the ci and ticket watchers share.
	forges *forge.Set
	// disp runs push deliveries after settlements commit.
	disp *deliver.Dispatcher
	// metrics is served at /metrics.
	metrics *metrics.Metrics
	// fs wakes folder and file watches on file system events.
	fs *fsWake
	// panel is the web panel served at /.
	panel *web.Panel
	// started is when New ran, for the panel's uptime.
	started time.Time
	// links signs and checks the unsubscribe links of delivery mails.
	links *email.Links
	// keys are the fingerprints of the webhook secrets and link key.
	keys KeyFingerprints

	// checked waits for the check of the SQLite file that runs on after
	// the store opens (sqlite.Options.CheckLater): nil, or the refusal of
	// a damaged file.
	checked func(context.Context) error

	ready atomic.Bool
	// stopped is closed once Run's context has ended: /readyz answers
	// 503 from then on, while the requests in flight finish.
	stopped chan struct{}
	// drainWait waits out shutdown_drain (time.After; tests end it
	// themselves).
	drainWait func(time.Duration) <-chan time.Time
	// storeOK answers whether the store answers, for /readyz.
	storeOK   *storeCheck
	primed    chan struct{}
	ran       atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Run validates cfg, starts a daemon and runs it until ctx ends.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	d, err := New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// New validates cfg and does everything that can fail before serving: it
// creates the data directory (0700, tightened if found looser), takes the
// exclusive lock on it (a second daemon on the same directory is refused),
// checks that the database was not lost (empty, or missing from a data
// directory that was used), opens the store (applying migrations; the
// SQLite file's check runs on into Run, which refuses a damaged file before
// it is ready or writes to it), reads or writes the admin token and binds
// the listen address, so Addr is known at once. Refusals match ErrRefused. A
// nil logger discards. Call Run, or Close to let go of it all without
// running.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (_ *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	forges, err := forge.New(cfg.Forges, forge.Options{})
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := privateDir(cfg.DataDir, logger); err != nil {
		return nil, err
	}
	// What New acquires, let go of in reverse if it fails part way.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { lock.release() })
	var dbLock *dirLock
	if !cfg.Postgres() {
		if dbLock, err = lockDatabase(cfg); err != nil {
			return nil, err
		}
		undo = append(undo, func() { dbLock.release() })
	}
	replica := cmp.Or(cfg.Replica, ReplicaID())
	var st vigil.Store
	open := func() (err error) {
		st, err = openStore(ctx, cfg, replica, logger)
		return err
	}
	if cfg.Postgres() {
		// The database restarting or failing over as this replica
		// starts: tried again rather than the start failing.
		err = untilAvailable(ctx, logger, "opening the store", nil, open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, err
	}
	pg, _ := st.(*postgres.Store)
	if pg != nil {
		// A replica holds no shard until its lease manager takes some:
		// priming at start arms nothing, each shard taken is armed then.
		pg.SetFence(replica, nil)
	}
	undo = append(undo, func() { st.Close() })
	// The signing keys, after the database as the token (see
	// checkDatabase). A replica compares them with the live replicas'
	// before it serves or takes a shard, and refuses to start on keys
	// that differ.
	secrets, err := ensureWebhookSecrets(cfg.DataDir, logger)
	if err != nil {
		return nil, err
	}
	linkKey, err := ensureLinkKey(cfg.DataDir, logger)
	if err != nil {
		return nil, err
	}
	keyPrints, err := keyFingerprints(secrets, linkKey, cfg.Delivery)
	if err != nil {
		return nil, err
	}
	// With those of the rest of the settings every replica must share.
	prints := replicaPrints{KeyFingerprints: keyPrints, Shared: sharedFingerprints(cfg)}
	// keys compares them and records them: at the start, and again
	// after a lapse of the replica's lease (shards.rejoin).
	keys := func(ctx context.Context) error { return checkKeys(ctx, pg, cfg, replica, prints, logger, false) }
	if pg != nil {
		if err := checkKeys(ctx, pg, cfg, replica, prints, logger, true); err != nil {
			return nil, err
		}
		// A start that fails from here on does not count as live.
		undo = append(undo, func() { forgetKeys(pg, replica) })
	}
	// The token only after the database: a data dir holding a token
	// always had one (see checkDatabase).
	token, err := ensureToken(TokenPath(cfg.DataDir), logger)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	undo = append(undo, func() { ln.Close() })
	lock.record(ln.Addr().String())
	dbLock.record(ln.Addr().String())

	// The scheduler first: it decides when each watch's turn comes, and
	// the watchers that learn of a change wake their watch in it.
	sched := scheduler.New(scheduler.Config{Workers: cfg.ProbeWorkers})
	// One file system notifier wakes folder and file watches.
	fs := newFSWake(logger, sched)
	// Every built-in kind, each built by its descriptor from what the
	// daemon shares: one forge.Set for the kinds that ask forges (they
	// share each token's cache, coalescing and rate-limit state), and the
	// scheduler's Poke for the watchers that learn of a change (a run that
	// ends pokes its watch). With replicas a run's start is recorded,
	// fenced, with the id of the replica that makes it (run.StoreStart).
	runReplica := ""
	if pg != nil {
		runReplica = replica
	}
	reg := watcher.Build(kinds.Builtin(), watcher.Deps{
		DenyPrivate: cfg.DenyPrivate,
		Roots:       cfg.Roots,
		AllowExec:   cfg.AllowExec,
		MinEvery:    cfg.Limits.MinEvery,
		MaxDeadline: cfg.Limits.MaxDeadline,
		DataDir:     cfg.DataDir,
		Logger:      logger,
		Notifier:    fs.n,
		Forges:      forges,
		PokeFunc:    sched.Poke,
		StartFunc:   run.StoreStart(st, pg != nil),
		Replica:     runReplica,
	})

	d := &Daemon{cfg: cfg, log: logger, token: token, store: st, ln: ln, lock: lock, dbLock: dbLock, kinds: reg.Kinds(), primed: make(chan struct{}), stopped: make(chan struct{}),
		sched: sched, watchers: reg.Watchers(), fs: fs, forges: forges, replica: replica, started: time.Now(), keys: keyPrints,
		checked: checkedStore(st), storeOK: newStoreCheck(st), drainWait: time.After}
	// Scoped tokens: authenticated per request (cached briefly; a
	// revocation here takes effect at once) and re-checked before every
	// probe of the watches they made.
	tokens := auth.New(auth.Config{Store: st, MaxNameBytes: cfg.Limits.MaxNameBytes})
	// Prometheus at /metrics; each part's gauge is added once it exists.
	d.metrics = metrics.New(metrics.Gauges{PendingWatches: sched.Len})
	d.registerReplicaMetrics(d.metrics.Registry())
	d.links = newLinks(cfg.Delivery.PublicURL, ln.Addr().String(), linkKey)
	disp, policy, err := newDispatcher(cfg, st, secrets, logger, d.metrics.Receipt, d.links, emailAccess(tokens))
	if err != nil {
		return nil, err
	}
	d.disp = disp
	d.metrics.Add(metrics.Gauges{DeliveriesQueued: disp.Pending})
	var holds func(string) bool
	var checkElsewhere func(context.Context, string) error
	if pg != nil {
		holds, checkElsewhere = pg.Holds, pg.NotifyCheck
	}
	d.eng = engine.New(engine.Config{
		Store:     st,
		Watchers:  reg,
		Scheduler: sched,
		Limits:    cfg.Limits,
		Logger:    logger,
		CheckFunc: tokens.CheckWatch,
		Metrics:   d.metrics,
		// Push delivery: the dispatcher hears of each settlement after
		// its commit; registrations may ask only for channels it has.
		DeliverFunc:   disp.Deliver,
		DeliverPolicy: policy,
		// A token watch's secret is derived from the link key, so that
		// a replayed registration answers its completion URL again.
		CompletionKey: linkKey,
		// On PostgreSQL, what the other daemons commit is announced
		// to it (pgEvents); the shards this replica holds are the
		// watches it schedules; a check of another's asks its holder.
		Shared:             cfg.Postgres(),
		HoldsFunc:          holds,
		CheckElsewhereFunc: checkElsewhere,
	})
	if pg != nil {
		d.pgEvents = newPGEvents(pg, d.eng, logger)
		if d.shards, err = newShards(cfg, pg, replica, d.eng, sched, disp, fs, calendarKind(reg), keys, logger); err != nil {
			return nil, err
		}
		d.pgEvents.also = d.shards.heard
	}
	d.api = httpapi.New(httpapi.Options{
		Service:          d.eng,
		AdminToken:       token,
		AuthenticateFunc: tokens.Authenticate,
		Tokens:           tokens,
		RegisterRate:     registerRate(cfg.RegisterRate),
		RegisterBurst:    cfg.RegisterBurst,
		MaxLongCalls:     maxLongCalls(cfg.MaxStreamsPerToken),
		// On PostgreSQL the buckets are the database's, shared by
		// the replicas.
		RateTakeFunc:    rateTake(st),
		Logger:          logger,
		MaxWait:         cfg.Limits.MaxWait,
		ReadyFunc:       d.readyz,
		ObserveFunc:     d.metrics.Request,
		UnsubscribeFunc: d.unsubscribe,
		LastSeqFunc:     st.MessagesLastSeq,
		// Against DNS rebinding: the Host must be this address, a
		// loopback name or one the operator allows.
		ListenAddr:   ln.Addr().String(),
		AllowedHosts: allowedHosts(cfg),
	})
	d.metrics.Add(metrics.Gauges{LongCalls: d.api.LongCalls})
	d.api.MountPublic("GET /metrics", d.metrics.Handler())
	d.api.Mount("GET /v1/daemon", http.HandlerFunc(d.info))
	// MCP for agents at /mcp, behind the same bearer tokens as the API.
	// The tools share the API's per-token registration rate limit.
	mcpHandler := mcpserver.NewHandler(d.api.Limited(d.eng), &mcpserver.Options{
		DefaultRecipient: cfg.DefaultRecipient,
		Logger:           logger,
		MaxWait:          min(mcpserver.DefaultMaxWait, cfg.Limits.MaxWait),
		Kinds:            reg.Descriptors(),
	})
	// Each MCP request counts among its token's long-lived requests
	// (max_streams_per_token), as the API's streams and long-polls do.
	d.api.Mount("/mcp", d.api.Bounded(mcpHandler))
	// The web panel at /: its own sign-in (a session cookie), the same
	// service and scopes as the API.
	d.panel = web.New(web.Options{
		Service:          d.eng,
		AdminToken:       token,
		AuthenticateFunc: tokens.Authenticate,
		Tokens:           tokens,
		Watchers:         reg,
		Events:           d.api.EventStream(),
		Probes:           d.eng.Probes,
		WatchMessages:    d.eng.WatchMessages,
		Counts:           d.eng.Counts,
		LastSeqFunc:      st.MessagesLastSeq,
		StatusFunc:       d.panelStatus,
		Logger:           logger,
	})
	for _, pattern := range web.Patterns() {
		d.api.MountPublic(pattern, d.panel.Handler())
	}
	d.srv = &http.Server{
		Handler:           d.gate(d.api.Handler()),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelDebug),
	}
	d.srv.RegisterOnShutdown(d.api.Close)
	d.srv.RegisterOnShutdown(mcpHandler.Close)
	return d, nil
}

// Addr returns the address the daemon listens on (host:port), with the
// real port when the configuration asked for port 0.
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// URL returns the base URL of the API: http://Addr.
func (d *Daemon) URL() string { return "http://" + d.Addr() }

// Token returns the admin token.
func (d *Daemon) Token() string { return d.token }

// Ready reports whether the daemon has loaded its pending watches and
// answers requests.
func (d *Daemon) Ready() bool { return d.ready.Load() }

// Primed is closed once Run has loaded the pending watches and the API
// answers requests.
func (d *Daemon) Primed() <-chan struct{} { return d.primed }

// gate answers API and MCP requests with 503 until the engine is primed;
// /healthz, /readyz and /openapi.json are served all along. Once primed,
// the API serves until the server shuts down: a request that reaches it
// during a shutdown is served, not refused as if the daemon were starting.
func (d *Daemon) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.isPrimed() && (strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != "/v1/daemon" || r.URL.Path == "/mcp") {
			w.Header().Set("Retry-After", "1")
			err := errStarting
			if d.isStopping() {
				err = errShutdown
			}
			d.api.Fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Run serves until ctx ends, then shuts down in order: stop accepting
// connections and end long-polls and event streams, cancel probes in
// flight and wait for the engine; stop starting push deliveries and let
// those in flight finish and record their results for deliveryGrace (on
// PostgreSQL the replica holds its shards, and the fence those results
// are written on, until then, and lets go of them after); and close the
// store. It returns the first error that stopped it, or nil after a
// shutdown asked for by ctx: a SQLite file that its check, running on
// from New, finds damaged stops it before it is ready with a refusal
// (ErrRefused). Run may be called once.
func (d *Daemon) Run(ctx context.Context) (err error) {
	if !d.ran.CompareAndSwap(false, true) {
		return errors.New("daemon: Run called twice")
	}
	defer func() { err = errors.Join(err, d.Close()) }()

	d.log.Info("vigil is serving", "listen", d.Addr(), "data_dir", d.cfg.DataDir, "store", d.cfg.StoreName(), "replica", d.replica,
		"kinds", kindList(d.kinds), "allow_exec", d.cfg.AllowExec)

	// The engine's context ends only after the HTTP server has shut down,
	// so no request is left talking to a stopped engine.
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()

	g, gctx := errgroup.WithContext(ctx)
	// delivered is closed once the dispatcher has returned, the results of
	// its attempts recorded (or cut short): only then does a replica's
	// lease manager let go of its shards, whose fence those writes need.
	delivered := make(chan struct{})
	g.Go(func() error {
		if err := d.srv.Serve(d.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// Receipts left by the last run first: a watch the scheduler
		// settles from here on is handed over afresh. A replica resumes
		// each shard's as it takes it (see shards.gain), never all of
		// them: the others' are in flight.
		// They are resumed once the pending watches are read and before
		// any is settled (PrimeWith), so the reading runs beside the
		// SQLite file's check (checkedStore), which every write waits
		// for.
		var (
			resume    func(context.Context) error
			resumeErr error
		)
		if d.shards == nil {
			resume = func(ctx context.Context) error {
				resumeErr = d.disp.Resume(ctx)
				return resumeErr
			}
		}
		prime := func() error { return d.eng.PrimeWith(engCtx, resume) }
		var err error
		if d.shards != nil {
			// A replica holds no shard yet: priming reads none, and is
			// tried again while the database restarts or fails over
			// rather than the start failing.
			err = untilAvailable(engCtx, d.log, "loading pending watches", nil, prime)
		} else {
			err = prime()
		}
		// A damaged file is what stops the start, whatever else failed
		// on it first; and the daemon is not ready before its check
		// passed.
		if cerr := d.checked(engCtx); cerr != nil || engCtx.Err() != nil {
			if engCtx.Err() != nil {
				return nil // shut down before it was ready
			}
			return cerr
		}
		if resumeErr != nil {
			return resumeErr
		}
		if err != nil {
			return fmt.Errorf("loading pending watches: %w", err)
		}
		d.ready.Store(true)
		close(d.primed)
		// Priming read every pending row (a few hundred bytes each)
		// to keep about a hundred and twenty of each in the scheduler:
		// the rest is garbage the runtime would hand back to the system
		// only slowly. One collection now, cheap since the scheduler
		// holds no pointers per watch, returns it at once.
		debug.FreeOSMemory()
		if d.shards != nil {
			// Every replica serves the API from here on; the shards it
			// takes are armed as it takes them.
			g.Go(func() error { return d.shards.run(engCtx, delivered) })
		}
		if err := d.eng.Run(engCtx); err != nil && engCtx.Err() == nil {
			return fmt.Errorf("engine: %w", err)
		}
		if engCtx.Err() == nil {
			return errors.New("engine: stopped unexpectedly")
		}
		return nil
	})
	// The dispatcher stops starting attempts with the engine, and gives
	// those in flight deliveryGrace to finish (deliver.Config.StopGrace).
	g.Go(func() error {
		defer close(delivered)
		return d.disp.Run(engCtx)
	})
	if d.pgEvents != nil {
		// What the other daemons on the database commit reaches this
		// one's waits, long-polls and streams.
		g.Go(func() error { return d.pgEvents.run(engCtx) })
	}
	for _, w := range d.watchers {
		r, ok := w.(watcher.Runner)
		if !ok {
			continue
		}
		g.Go(func() error {
			// A watcher's background work (ended runs wake their
			// watches) starts once the scheduler holds the watches.
			select {
			case <-d.primed:
			case <-engCtx.Done():
				return nil
			}
			return r.Run(engCtx)
		})
	}
	g.Go(func() error {
		// File system events wake folder and file watches, once the
		// scheduler holds them.
		select {
		case <-d.primed:
		case <-engCtx.Done():
			return nil
		}
		return d.fs.run(engCtx, d.sched.IDs(vigil.KindFolder), d.watchers)
	})
	g.Go(func() error {
		<-gctx.Done()
		close(d.stopped)
		d.ready.Store(false)
		if drain := d.cfg.ShutdownDrain; drain > 0 && ctx.Err() != nil {
			// /readyz answers 503 from now on: a load balancer that
			// probes it stops routing here while the listener still
			// accepts and the API serves what it is sent meanwhile.
			d.log.Info("vigil is stopping: draining before it closes its listener", "shutdown_drain", vigil.FormatDuration(drain))
			<-d.drainWait(drain)
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		err := d.srv.Shutdown(sctx)
		if err != nil {
			d.srv.Close()
			err = fmt.Errorf("http shutdown: %w", err)
		}
		stopEngine()
		return err
	})
	err = g.Wait()
	if err == nil {
		d.log.Info("vigil stopped")
	}
	return err
}

// Close releases what New acquired: the listener, the forges' reads and
// the watchers' connections, the store and, last, the locks on the data
// directory and the database, so that no second daemon starts on them
// while any of the rest is still this one's. Run calls it on its way out;
// call it yourself only for a daemon never run.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		if pg, ok := d.store.(*postgres.Store); ok && !d.ran.Load() {
			// Never run: it never took a shard, and must not count
			// as a live replica (Run's leave forgets it otherwise).
			forgetKeys(pg, d.replica)
		}
		lerr := d.ln.Close()
		if errors.Is(lerr, net.ErrClosed) {
			lerr = nil
		}
		d.forges.Close()
		for _, w := range d.watchers {
			if c, ok := w.(io.Closer); ok {
				c.Close()
			}
		}
		serr := d.store.Close()
		d.closeErr = errors.Join(lerr, serr, d.dbLock.release(), d.lock.release())
	})
	return d.closeErr
}

func kindList(ks []vigil.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// registerRate maps the register_rate key (0: no limit) to
// httpapi.Options.RegisterRate (negative: no limit).
func registerRate(n int) float64 {
	if n <= 0 {
		return -1
	}
	return float64(n)
}

// maxLongCalls maps the max_streams_per_token key (0: no bound) to
// httpapi.Options.MaxLongCalls (negative: no bound).
func maxLongCalls(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// allowedHosts are the host names a request's Host may name besides the
// listen address and loopback: allowed_hosts, and public_url's host, which
// the links vigil sends out (email unsubscribe) point at.
func allowedHosts(cfg Config) []string {
	hs := slices.Clone(cfg.AllowedHosts)
	if u, err := url.Parse(cfg.Delivery.PublicURL); err == nil && u.Hostname() != "" {
		hs = append(hs, strings.ToLower(u.Hostname()))
	}
	return hs
}
