package deliver

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// Defaults of a Dispatcher.
const (
	DefaultWorkers = 16
	// DefaultPerRecipient is how many of one recipient's deliveries are
	// in flight at most; DefaultPerDestination, how many to one
	// destination (a webhook's scheme, host and port; a recipient's
	// commands; the SMTP relay).
	DefaultPerRecipient   = 4
	DefaultPerDestination = 4
	// DefaultResumeWindow is how far back Resume looks for settled watches
	// never handed to a channel (the watch retention).
	DefaultResumeWindow = 7 * 24 * time.Hour
	// storeRetry is the wait after the store failed to record a receipt.
	storeRetry = 5 * time.Second
	// finalWrite bounds the write of the receipt that ends an attempt,
	// which does not end with the dispatcher's context: what the attempt
	// did is known, and is recorded even while the daemon shuts down.
	finalWrite = 5 * time.Second
	maxDetail  = 300
)

// Config configures a Dispatcher. Zero fields take defaults.
type Config struct {
	Store vigil.Store
	// Channels by name (ChannelWebhook, ChannelCommand, ChannelEmail); a
	// watch asking for a channel missing here gets an undeliverable
	// receipt saying so.
	Channels map[string]Channel
	// RecipientWebhooks are default webhooks by recipient, for watches
	// that name none. Resume records them in the store (a digest of each
	// URL), and a default is owed at a start only by the outcomes that
	// settled while it was recorded: never by those before it was added.
	RecipientWebhooks map[string]WebhookOptions
	// RecipientSecrets are webhook signing secrets by recipient: they sign
	// the webhooks of the recipient's watches that give no secret of their
	// own (else the webhook channel's own secrets sign).
	RecipientSecrets map[string]string
	// NowFunc is the clock; nil means time.Now. Retry waits use timers, so
	// tests run the dispatcher inside testing/synctest.
	NowFunc func() time.Time
	Logger  *slog.Logger
	// Workers is how many deliveries run at once (default DefaultWorkers).
	Workers int
	// PerRecipient bounds one recipient's deliveries in flight, and
	// PerDestination those to one destination (defaults
	// DefaultPerRecipient, DefaultPerDestination): a slow endpoint holds
	// at most that many workers, whoever it belongs to.
	PerRecipient, PerDestination int
	// ResumeWindow bounds Resume's search for watches settled but never
	// handed over (default DefaultResumeWindow).
	ResumeWindow time.Duration
	// ReceiptFunc, when set, hears of each receipt recorded after an
	// attempt: its channel and status. For metrics; it must be cheap.
	ReceiptFunc func(channel, status string)
	// AccessFunc, when set, is asked before each email attempt, and
	// before each command or resume run, whether the watch's maker may
	// still reach its recipient (a scoped token not revoked): a Denied
	// error records the delivery undeliverable and sends or runs nothing;
	// any other error is retried.
	AccessFunc func(ctx context.Context, w *vigil.Watch) error
	// HoldsFunc, when set, says whether this dispatcher delivers for the
	// watch id: on a replica, whether it holds the watch's shard. An
	// attempt of a watch it does not hold (any more) is dropped before
	// anything is written or sent: the holder resumes it. Nil: all.
	HoldsFunc func(watchID string) bool
	// StopGrace is how long the attempts in flight when Run's context
	// ends may go on to finish and record their results before they are
	// cut short (see Run). Zero: none, they are cut at once.
	StopGrace time.Duration
}

// Dispatcher runs push deliveries after settlements commit: one loop over
// a min-heap of attempts not yet due (new deliveries are due at once,
// retries at their rung of the ladder) and a fixed pool of workers, never
// a goroutine or timer per delivery. Due attempts wait in per-recipient
// queues that the workers serve in turn, with at most PerRecipient of one
// recipient's and PerDestination to one destination in flight, so that a
// slow or hanging endpoint delays only the deliveries that go to it. Hand
// work to it with Deliver (the scheduler's DeliverFunc), which never
// blocks; call Resume once at start-up before the scheduler settles
// anything; Run until ctx is done.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	h      jobHeap
	active map[string]bool // watch id + "/" + channel: queued or in flight
	wake   chan struct{}
	// due holds the attempts that are due, until a worker takes them.
	due fairQueue
	// idle counts the workers free to take an attempt.
	idle int
	// resumed are attempts a resume found due (a retrying receipt, or an
	// unknown one under retry_unknown) while a job of the same delivery
	// was active: one left from before the watch's shard moved away and
	// came back, queued or in flight. Such a job follows an older receipt
	// and its claim fails: when it ends, the attempt resumed is queued in
	// its place (finish). One that claims the receipt makes the attempt
	// itself, and the one resumed is forgotten.
	resumed map[string]*job
	// drain keeps the attempts in flight, for Drain (drain.go).
	drain drainer
}

// job is one delivery waiting for its next attempt.
type job struct {
	watchID, channel, messageID string
	attempts                    int   // made so far
	due                         int64 // unix nanoseconds
	w                           *vigil.Watch
	// recipient and dest place it in the fair queue; empty until known.
	recipient, dest string
	// opts are w's delivery options once read: parsed once per job (once
	// per settlement, shared by its jobs; once when Resume or the job's
	// first turn reads its watch), never per attempt. Never written
	// through.
	opts *Options
	// owed is the receipt that ended its last attempt when the store
	// failed to record it: its next turn writes it again, and sends
	// nothing.
	owed *vigil.ReceiptRecord
	// unknown marks a receipt a resume found left sending (now unknown)
	// whose watch it could not read: its first turn reads the watch and
	// makes the attempt only if the webhook opted into retry_unknown.
	unknown bool
}

// unresolved is the recipient and destination of a job whose watch is not
// read yet (a retry found by Resume): its first turn reads the watch and
// queues it again in its place.
const unresolved = "\x00unresolved"

// place sets j's recipient and destination from its watch and options.
func (j *job) place(o Options) {
	j.recipient, j.dest = j.w.Recipient, destinationOf(j.channel, o, j.w.Recipient)
}

// destinationOf names where a delivery goes, for the per-destination
// bound: a webhook's scheme, host and port; a command's recipient (it runs
// on this host, at its recipient's cost); the one SMTP relay.
func destinationOf(channel string, o Options, recipient string) string {
	switch {
	case channel == ChannelWebhook && o.Webhook != nil:
		u, err := url.Parse(o.Webhook.URL)
		if err != nil {
			return "webhook " + o.Webhook.URL
		}
		port := u.Port()
		switch {
		case port != "":
		case u.Scheme == "https":
			port = "443"
		case u.Scheme == "http":
			port = "80"
		}
		return "webhook " + u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	case channel == ChannelCommand, channel == ChannelResume:
		// A resumed agent runs on this host too: it shares the
		// recipient's command bound.
		return "command " + recipient
	default:
		return channel
	}
}

func (j *job) key() string { return j.watchID + "/" + j.channel }

// New returns a dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = DefaultResumeWindow
	}
	if cfg.PerRecipient <= 0 {
		cfg.PerRecipient = DefaultPerRecipient
	}
	if cfg.PerDestination <= 0 {
		cfg.PerDestination = DefaultPerDestination
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, log: log.With("component", "deliver"), active: map[string]bool{}, resumed: map[string]*job{}, wake: make(chan struct{}, 1),
		due: newFairQueue(cfg.PerRecipient, cfg.PerDestination)}
}

func (d *Dispatcher) now() time.Time { return d.cfg.NowFunc().UTC() }

func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Options returns a watch's delivery options with its recipient's default
// webhook filled in when it names none, and its recipient's secret when
// the webhook gives none.
func (d *Dispatcher) Options(w *vigil.Watch) (Options, error) {
	o, err := ParseOptions(w.Deliver)
	if err != nil {
		return o, err
	}
	if o.Webhook == nil {
		if def, ok := d.cfg.RecipientWebhooks[w.Recipient]; ok {
			o.Webhook = &def
		}
	}
	if o.Webhook != nil && o.Webhook.Secret == "" {
		if s, ok := d.cfg.RecipientSecrets[w.Recipient]; ok {
			wh := *o.Webhook
			wh.Secret = s
			o.Webhook = &wh
		}
	}
	return o, nil
}

// jobOptions returns j's delivery options, parsing them from its watch
// only the first time: kept on j, they serve its every attempt. Options
// that cannot be read are not kept: the attempt reads them again and says
// so in the receipt.
func (d *Dispatcher) jobOptions(j *job) Options {
	if j.opts != nil {
		return *j.opts
	}
	o, err := d.Options(j.w)
	if err == nil {
		j.opts = &o
	}
	return o
}

// channels lists the channels an outcome goes to: a webhook for every
// outcome, the command whose "on" names the outcome's class, an email for
// fired and failed only, the resume when its "on" names the class.
func channels(o Options, s vigil.State) []string {
	var out []string
	if o.Webhook != nil {
		out = append(out, ChannelWebhook)
	}
	if o.Command.For(s) != nil {
		out = append(out, ChannelCommand)
	}
	if o.Email != nil && (s == vigil.StateFired || s == vigil.StateFailed) {
		out = append(out, ChannelEmail)
	}
	if o.Resume != nil && o.Resume.Runs(s) {
		out = append(out, ChannelResume)
	}
	return out
}

// Deliver hands a settlement that won to the push channels. It never
// blocks: the attempts run on the dispatcher's workers. m nil (a silent
// settlement, answered at creation) delivers nothing.
func (d *Dispatcher) Deliver(w *vigil.Watch, m *vigil.Message) {
	if w == nil || m == nil || w.AnsweredAtCreation {
		return
	}
	d.enqueue(w, m.ID)
}

// enqueue queues a job for each channel w's outcome goes to, but those in
// skip (channels that already have a receipt).
func (d *Dispatcher) enqueue(w *vigil.Watch, messageID string, skip ...string) {
	o, err := d.Options(w)
	if err != nil {
		d.log.Error("unreadable delivery options", "watch_id", w.ID, "err", err)
		return
	}
	now := d.now().UnixNano()
	chs := channels(o, w.State)
	jobs := make([]*job, len(chs))
	for i, ch := range chs {
		jobs[i] = &job{watchID: w.ID, channel: ch, messageID: messageID, due: now, w: w, opts: &o}
		jobs[i].place(o)
	}
	d.mu.Lock()
	for _, j := range jobs {
		if slices.Contains(skip, j.channel) {
			continue
		}
		d.pushLocked(j)
	}
	d.mu.Unlock()
	d.signal()
}

func (d *Dispatcher) pushLocked(j *job) {
	if d.active[j.key()] {
		return
	}
	d.active[j.key()] = true
	heap.Push(&d.h, j)
}

// resumeLocked queues j, an attempt a resume found due, or keeps it for
// when the job of the same delivery still active ends (resumed).
func (d *Dispatcher) resumeLocked(j *job) {
	if d.active[j.key()] {
		d.resumed[j.key()] = j
		return
	}
	d.pushLocked(j)
}

// Resume picks up what a previous run left: receipts left "sending" are
// now "unknown" (resent only with retry_unknown), "retrying" ones are due
// at their next rung, and each channel a settled watch asks for that has
// no receipt (never taken by a worker: the daemon stopped while it was
// queued, whatever became of the watch's other channels) is delivered
// now. Call it once, before the scheduler settles anything.
func (d *Dispatcher) Resume(ctx context.Context) error {
	return d.ResumeWith(ctx, d.cfg.Store.ReceiptsResume)
}

// ResumeWith is Resume over what resume finds: a replica that took over
// shards resumes their receipts only (see store/postgres
// ReceiptsResumeShards), with the same rules. An attempt found due for a
// delivery that still has a job here (from before its shard moved away and
// back) is made when that job ends without making it (resumeLocked).
func (d *Dispatcher) ResumeWith(ctx context.Context, resume func(context.Context, vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error)) error {
	now := d.now()
	p := vigil.ReceiptsResumeParams{Now: now, SettledSince: now.Add(-d.cfg.ResumeWindow),
		Channels:       []string{ChannelWebhook, ChannelCommand, ChannelEmail, ChannelResume},
		DefaultChannel: ChannelWebhook, Defaults: make(map[string]string, len(d.cfg.RecipientWebhooks))}
	for r, o := range d.cfg.RecipientWebhooks {
		p.Defaults[r] = defaultKey(o)
	}
	res, err := resume(ctx, p)
	if err != nil {
		return fmt.Errorf("deliver: resume: %w", err)
	}
	ids := make([]string, 0, len(res.Unknown)+len(res.Undispatched))
	for _, r := range res.Unknown {
		d.log.Warn("delivery interrupted: its receipt is now unknown", "watch_id", r.WatchID, "channel", r.Channel, "attempts", r.Attempts)
		ids = append(ids, r.WatchID)
	}
	for _, u := range res.Undispatched {
		ids = append(ids, u.WatchID)
	}
	// An attempt under retry_unknown is resumed as retrying (its receipt
	// said when the next is due: vigil.ResumeSending), durably, whatever
	// happens to this start. What follows is for receipts a build before
	// that wrote, which said nothing: their options decide.
	ws, err := d.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
		// The store has turned them unknown already: a resume tried
		// again finds them no more. Those that may be resent wait for
		// their turn to read their watch (job.unknown).
		d.mu.Lock()
		for _, r := range res.Unknown {
			if _, rung := NextRetry(r.Attempts); r.Channel == ChannelWebhook && rung {
				d.resumeLocked(&job{watchID: r.WatchID, channel: r.Channel, messageID: r.MessageID, attempts: r.Attempts, due: now.UnixNano(), unknown: true})
			}
		}
		d.mu.Unlock()
		d.signal()
		return fmt.Errorf("deliver: resume: %w", err)
	}
	byID := make(map[string]*vigil.Watch, len(ws))
	for _, w := range ws {
		byID[w.ID] = w
	}
	d.mu.Lock()
	for _, r := range res.Unknown {
		w := byID[r.WatchID]
		if w == nil || r.Channel != ChannelWebhook {
			continue
		}
		if _, rung := NextRetry(r.Attempts); !rung {
			// Its ladder has run out: as an unknown answer on the last
			// rung is final while the daemon runs (see attempt).
			continue
		}
		if o, err := d.Options(w); err == nil && o.Webhook != nil && o.Webhook.RetryUnknown {
			j := &job{watchID: r.WatchID, channel: r.Channel, messageID: r.MessageID, attempts: r.Attempts, due: now.UnixNano(), w: w, opts: &o}
			d.resumeLocked(j)
		}
	}
	for _, r := range res.Retrying {
		d.resumeLocked(&job{watchID: r.WatchID, channel: r.Channel, messageID: r.MessageID, attempts: r.Attempts, due: r.NextAt.UnixNano()})
	}
	d.mu.Unlock()
	for _, u := range res.Undispatched {
		w := byID[u.WatchID]
		if w == nil {
			continue
		}
		skip := u.Receipted
		if !u.Default {
			// Its recipient's default webhook, if it has one now, came
			// after it settled: the outcome owed it nothing.
			if o, err := ParseOptions(w.Deliver); err == nil && o.Webhook == nil {
				skip = append(slices.Clone(skip), ChannelWebhook)
			}
		}
		d.enqueue(w, u.MessageID, skip...)
	}
	d.signal()
	return nil
}

// defaultKey is what the store records of a recipient's default webhook
// (ReceiptsResumeParams.Defaults): a digest of its URL, which changes when
// the default goes elsewhere and keeps the URL (it may hold a token) out
// of the database.
func defaultKey(o WebhookOptions) string {
	sum := sha256.Sum256([]byte(o.URL))
	return hex.EncodeToString(sum[:])
}

// Pending returns how many deliveries are queued or in flight.
func (d *Dispatcher) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.active)
}

// Run delivers until ctx is done, then returns nil once the attempts in
// flight have ended. From ctx's end no attempt starts (the due ones are
// left for Resume to find at the next start: no receipt, or a retrying
// one), and those in flight go on for StopGrace (stop.go) to finish and
// record their results as they would have without the shutdown: a
// routine restart does not turn a webhook answered in 200 ms into
// "unknown". Past the grace they are cut short, and each is recorded as
// its channel reports it (the final write outlives the cut, see record):
// one that ended anyway as it ended; one the channel says never left (it
// may be tried again: a webhook still connecting) "retrying", due at
// once, so the next start sends it; one cut mid-send stays "sending",
// read back as "unknown".
func (d *Dispatcher) Run(ctx context.Context) error {
	// The attempts' context: it outlives ctx by the grace (wind).
	actx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	work := make(chan grant)
	var wg sync.WaitGroup
	for range d.cfg.Workers {
		wg.Go(func() {
			for g := range work {
				if ctx.Err() != nil {
					// Handed over as ctx ended: not started, as below.
					d.mu.Lock()
					delete(d.active, g.j.key())
					d.mu.Unlock()
				} else {
					d.attempt(actx, g.j, ctx.Done())
				}
				d.mu.Lock()
				d.due.done(g)
				d.idle++
				d.mu.Unlock()
				d.signal()
			}
		})
	}
	d.mu.Lock()
	d.idle = d.cfg.Workers
	d.mu.Unlock()
	defer func() {
		close(work)
		d.wind(&wg, cut)
		// Due but not started: forget them; Resume finds them again (no
		// receipt, or a retrying one).
		d.mu.Lock()
		for _, j := range d.due.drain() {
			delete(d.active, j.key())
		}
		d.mu.Unlock()
	}()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d.mu.Lock()
		now := d.now().UnixNano()
		for len(d.h) > 0 && d.h[0].due <= now {
			d.queueLocked(heap.Pop(&d.h).(*job))
		}
		var g grant
		var start bool
		if d.idle > 0 {
			if g, start = d.due.pop(); start {
				d.idle--
			}
		}
		next, ok := int64(0), len(d.h) > 0
		if ok {
			next = d.h[0].due
		}
		d.mu.Unlock()
		if start {
			select {
			case work <- g:
				continue
			case <-ctx.Done():
				// Not started: forget them; Resume finds them again
				// (no receipt on that channel, or a retrying one).
				d.mu.Lock()
				d.due.done(g)
				delete(d.active, g.j.key())
				d.mu.Unlock()
				return nil
			}
		}
		var tc <-chan time.Time
		if ok {
			wait := time.Duration(next - now)
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-tc:
		}
	}
}

// queueLocked moves a job that came due into the fair queue.
func (d *Dispatcher) queueLocked(j *job) {
	if j.recipient == "" {
		if j.w == nil {
			j.recipient, j.dest = unresolved, unresolved
		} else {
			// Queued with its watch but not placed: place it now.
			j.place(d.jobOptions(j))
		}
	}
	d.due.push(j, j.recipient, j.dest)
}

// attempt makes one attempt of j and records its receipt before and after;
// stopping is closed once Run is stopping (Delivery.Stopping).
func (d *Dispatcher) attempt(ctx context.Context, j *job, stopping <-chan struct{}) {
	if (d.cfg.HoldsFunc != nil && !d.cfg.HoldsFunc(j.watchID)) || !d.takeOff(j.watchID) {
		// Its shard moved (or is being handed) to another replica,
		// which resumes it.
		d.finish(j)
		return
	}
	defer d.land(j.watchID)
	log := d.log.With("watch_id", j.watchID, "channel", j.channel)
	if rec := j.owed; rec != nil {
		// The attempt was made: only its receipt is left to record.
		if d.record(ctx, log, j, *rec) {
			d.advance(j, *rec)
		}
		return
	}
	w := j.w
	if w == nil {
		var err error
		if w, err = d.cfg.Store.WatchGet(ctx, j.watchID); err != nil {
			if errors.Is(err, vigil.ErrNotFound) {
				d.finish(j)
				return
			}
			if ctx.Err() == nil {
				log.Error("reading watch to deliver", "err", err)
			}
			d.retryLater(j, storeRetry)
			return
		}
		j.w = w
		if j.unknown {
			j.unknown = false
			if o, err := d.Options(w); err != nil || o.Webhook == nil || !o.Webhook.RetryUnknown {
				d.finish(j)
				return
			}
		}
		// Now that its recipient and destination are known, it waits for
		// its turn in their queues.
		j.place(d.jobOptions(j))
		d.retryLater(j, 0)
		return
	}
	var refused string
	if j.channel == ChannelEmail {
		fresh, why, err := d.recheckEmail(ctx, j)
		switch {
		case errors.Is(err, vigil.ErrNotFound):
			d.finish(j)
			return
		case err != nil:
			if ctx.Err() == nil {
				log.Error("checking the watch before mailing", "err", err)
			}
			d.retryLater(j, storeRetry)
			return
		}
		w, refused = fresh, why
	}
	rec := vigil.ReceiptRecord{WatchID: j.watchID, MessageID: j.messageID, Receipt: vigil.Receipt{Channel: j.channel, Attempts: j.attempts + 1}}
	var o Options
	var err error
	if j.opts != nil {
		o = *j.opts
	} else {
		o, err = d.Options(w)
	}
	ch := d.cfg.Channels[j.channel]
	switch {
	case refused != "":
		rec.Status, rec.Detail = vigil.ReceiptUndeliverable, refused
	case err != nil:
		rec.Status, rec.Detail = vigil.ReceiptUndeliverable, "the delivery options cannot be read"
	case ch == nil:
		rec.Status, rec.Detail = vigil.ReceiptUndeliverable, "this daemon has no "+j.channel+" channel configured"
	}
	if rec.Status != "" {
		rec.Attempts = j.attempts
		rec.UpdatedAt = d.now()
		if d.claim(ctx, log, j, rec) {
			if d.cfg.ReceiptFunc != nil {
				d.cfg.ReceiptFunc(rec.Channel, rec.Status)
			}
			d.finish(j)
		}
		return
	}
	waited := false
	if wt, ok := ch.(Waiter); ok {
		// Its turn first, with no receipt written: a crash while it
		// waits leaves the delivery as it was (no receipt, or the
		// retrying one it follows), and the next start makes it.
		release, err := wt.Wait(ctx, &Delivery{Watch: w, MessageID: j.messageID, Options: o, Stopping: stopping})
		if err != nil {
			// The dispatcher is stopping: nothing was written or sent.
			d.finish(j)
			return
		}
		defer release()
		waited = true
	}
	if j.channel == ChannelCommand || j.channel == ChannelResume {
		// It runs a program, which the exec scope of the watch's
		// token allowed: asked last, after any wait for its turn, so
		// that a token revoked (or expired, or deleted) since the
		// settlement runs nothing, at a retry or a restart either.
		denied, err := d.access(ctx, w)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("checking the watch's token before running", "err", err)
			}
			d.retryLater(j, storeRetry)
			return
		}
		if denied != "" {
			rec.Status, rec.Detail, rec.Attempts, rec.UpdatedAt = vigil.ReceiptUndeliverable, clip(denied+"; nothing was run"), j.attempts, d.now()
			if d.claim(ctx, log, j, rec) {
				if d.cfg.ReceiptFunc != nil {
					d.cfg.ReceiptFunc(rec.Channel, rec.Status)
				}
				d.finish(j)
			}
			return
		}
	}
	// The receipt exists before anything leaves: a crash from here on
	// reads back as unknown. It is claimed: written only over the receipt
	// this attempt follows, so that no other job of the same delivery (on
	// this daemon, or on the replica the watch's shard moved from or to)
	// has sent or is sending it.
	rec.Status, rec.UpdatedAt = vigil.ReceiptSending, d.now()
	retryUnknown := j.channel == ChannelWebhook && o.Webhook != nil && o.Webhook.RetryUnknown
	if wait, ok := NextRetry(rec.Attempts); ok && retryUnknown {
		wait = Spread(wait, j.key(), rec.Attempts)
		// Should the daemon stop before this attempt ends, the receipt
		// says when the next one is due: the resume that finds it sending
		// makes it retrying, durably, at the next start or on the replica
		// that takes the shard over (vigil.ResumeSending).
		rec.NextAt = rec.UpdatedAt.Add(wait)
	}
	if !d.claim(ctx, log, j, rec) {
		return
	}
	payload, _ := json.Marshal(NewPayload(w, j.messageID))
	retry, err := ch.Send(ctx, &Delivery{Watch: w, MessageID: j.messageID, Options: o, Payload: payload, Attempt: rec.Attempts, Now: rec.UpdatedAt, Stopping: stopping, Waited: waited})
	// Cut short by the shutdown, or given up unstarted as it began. An
	// answer that came (an HTTP status: the cut ended the reading of its
	// body) is what the attempt ended with, and is recorded as it is.
	var answered *StatusError
	stopped := err != nil && !errors.As(err, &answered) && (ctx.Err() != nil || errors.Is(err, ErrStopping))
	if stopped && (!retry || IsUnknown(err)) {
		// Cut short by the shutdown mid-send: it may have landed. The
		// receipt stays sending (unknown at the next start).
		return
	}
	now := d.now()
	rec.UpdatedAt, rec.Detail, rec.NextAt = now, "", time.Time{}
	var again time.Duration
	switch {
	case stopped:
		// Cut short by the shutdown before anything left (the channel
		// says it may be tried again): due at once, so that the next
		// start sends it, whatever rung of the ladder it was on.
		rec.Status, rec.Detail, rec.NextAt = vigil.ReceiptRetrying, clip(err.Error()), now
	case err == nil:
		rec.Status = vigil.ReceiptDelivered
	case IsUnknown(err):
		rec.Status, rec.Detail = vigil.ReceiptUnknown, clip(err.Error())
		if retryUnknown {
			if wait, ok := NextRetry(rec.Attempts); ok {
				rec.Status, again = vigil.ReceiptRetrying, Spread(wait, j.key(), rec.Attempts)
			}
		}
	case retry:
		if wait, ok := NextRetry(rec.Attempts); ok {
			wait = Spread(wait, j.key(), rec.Attempts)
			if se := (*StatusError)(nil); errors.As(err, &se) {
				// The receiver asked for longer (Retry-After).
				wait = max(wait, se.RetryAfter)
			}
			rec.Status, rec.Detail, again = vigil.ReceiptRetrying, clip(err.Error()), wait
		} else {
			rec.Status, rec.Detail = vigil.ReceiptUndeliverable, clip(fmt.Sprintf("gave up after %d attempts: %v", rec.Attempts, err))
		}
	default:
		rec.Status, rec.Detail = vigil.ReceiptUndeliverable, clip(err.Error())
	}
	if again > 0 {
		rec.NextAt = now.Add(again)
	}
	log.Info("delivery attempt", "status", rec.Status, "attempt", rec.Attempts, "detail", rec.Detail)
	if d.record(ctx, log, j, rec) {
		d.advance(j, rec)
	}
}

// advance moves j on once rec, the receipt its attempt ended with, is
// recorded: to its next attempt, due at rec.NextAt, when rec is retrying;
// else j is done.
func (d *Dispatcher) advance(j *job, rec vigil.ReceiptRecord) {
	if rec.Status != vigil.ReceiptRetrying {
		d.finish(j)
		return
	}
	j.attempts = rec.Attempts
	d.retryAt(j, rec.NextAt)
}

// claim writes rec, the receipt that starts j's attempt, if the receipt
// stored is still the one j follows (vigil.ReceiptUpsertParams.Claim). When
// another attempt took the delivery over it finishes j, which sends
// nothing; when the store fails it tries j again later. It reports whether
// rec was written.
func (d *Dispatcher) claim(ctx context.Context, log *slog.Logger, j *job, rec vigil.ReceiptRecord) bool {
	err := d.cfg.Store.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: rec, Claim: true, Prior: j.attempts})
	switch {
	case err == nil:
		// The receipt a resume found is the one j followed.
		d.mu.Lock()
		delete(d.resumed, j.key())
		d.mu.Unlock()
		return true
	case vigil.ErrorCode(err) == vigil.CodeConflict:
		log.Info("delivery taken over by another attempt: not sent again", "attempts", j.attempts)
		d.finish(j)
	case errors.Is(err, vigil.ErrNotFound):
		d.finish(j)
	default:
		if ctx.Err() == nil {
			log.Error("recording receipt before sending", "err", err)
		}
		d.retryLater(j, storeRetry)
	}
	return false
}

// record writes rec, the receipt that ends j's attempt, over that
// attempt's own receipt only (vigil.ReceiptUpsertParams.Ends), and reports
// whether it did. The write outlives ctx (a shutdown that came while the
// attempt ran), for at most finalWrite: a store that refuses a write whose
// context is done (SQLite) would otherwise leave an attempt that ended
// "sending". When the store fails, j keeps rec (owed) and writes it again
// storeRetry later, as claim tries again, until it is written or the
// watch's shard has moved to another replica (HoldsFunc): that replica's
// fence refuses the write, and it resumes the delivery (the receipt left
// sending is unknown there). Dropping j instead left a retry (a 5xx) not
// retried, and its receipt "sending", until the next start.
func (d *Dispatcher) record(ctx context.Context, log *slog.Logger, j *job, rec vigil.ReceiptRecord) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWrite)
	err := d.cfg.Store.ReceiptUpsert(wctx, vigil.ReceiptUpsertParams{ReceiptRecord: rec, Ends: true})
	cancel()
	if err != nil {
		if vigil.ErrorCode(err) == vigil.CodeConflict {
			// Another attempt followed this one (its shard moved to a
			// replica that resumed the delivery while it ran, and came
			// back): what that attempt wrote stands.
			log.Info("recording receipt: another attempt took this delivery over; its receipt stands", "status", rec.Status)
			d.finish(j)
			return false
		}
		if errors.Is(err, vigil.ErrNotFound) {
			// The watch was deleted (or pruned) while the attempt ran:
			// there is nothing left to record it on.
			log.Info("recording receipt: the watch is gone", "status", rec.Status)
			d.finish(j)
			return false
		}
		if d.cfg.HoldsFunc != nil && !d.cfg.HoldsFunc(j.watchID) {
			log.Warn("recording receipt: the watch's shard moved to another replica, which resumes the delivery", "status", rec.Status, "err", err)
			d.finish(j)
			return false
		}
		log.Error("recording receipt; trying again", "status", rec.Status, "err", err, "in", storeRetry)
		j.owed = &rec
		d.retryLater(j, storeRetry)
		return false
	}
	j.owed = nil
	if d.cfg.ReceiptFunc != nil {
		d.cfg.ReceiptFunc(rec.Channel, rec.Status)
	}
	return true
}

func (d *Dispatcher) retryLater(j *job, wait time.Duration) {
	d.retryAt(j, d.now().Add(wait))
}

// retryAt queues j again, due at at.
func (d *Dispatcher) retryAt(j *job, at time.Time) {
	d.mu.Lock()
	j.due = at.UnixNano()
	heap.Push(&d.h, j)
	d.mu.Unlock()
	d.signal()
}

// finish forgets j, and queues in its place the attempt a resume found due
// meanwhile, if any (resumed).
func (d *Dispatcher) finish(j *job) {
	d.mu.Lock()
	delete(d.active, j.key())
	r := d.resumed[j.key()]
	if r != nil {
		delete(d.resumed, j.key())
		d.pushLocked(r)
	}
	d.mu.Unlock()
	if r != nil {
		d.signal()
	}
}

// clip bounds a receipt's detail, in UTF-8 (PostgreSQL refuses text that
// is not): what a channel says may quote what a program wrote on stderr.
func clip(s string) string {
	return clipText(strings.ToValidUTF8(s, "\uFFFD"), maxDetail+len("…"))
}

// jobHeap is a min-heap of jobs by due time.
type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobHeap) Pop() any {
	old := *h
	n := len(old)
	j := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return j
}
