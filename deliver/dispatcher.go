package deliver

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// Defaults of a Dispatcher.
const (
	DefaultWorkers = 4
	// DefaultResumeWindow is how far back Resume looks for settled watches
	// never handed to a channel (the watch retention).
	DefaultResumeWindow = 7 * 24 * time.Hour
	// storeRetry is the wait after the store failed to record a receipt.
	storeRetry = 5 * time.Second
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
	// that name none.
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
	// ResumeWindow bounds Resume's search for watches settled but never
	// handed over (default DefaultResumeWindow).
	ResumeWindow time.Duration
	// ReceiptFunc, when set, hears of each receipt recorded after an
	// attempt: its channel and status. For metrics; it must be cheap.
	ReceiptFunc func(channel, status string)
	// AccessFunc, when set, is asked before each email attempt whether
	// the watch's maker may still reach its recipient (a scoped token not
	// revoked): a Denied error records the email undeliverable and sends
	// nothing; any other error is retried.
	AccessFunc func(ctx context.Context, w *vigil.Watch) error
}

// Dispatcher runs push deliveries after settlements commit: one loop over
// a min-heap of due attempts (new deliveries are due at once, retries at
// their rung of the ladder) and a fixed pool of workers, never a goroutine
// or timer per delivery. Hand work to it with Deliver (the scheduler's
// DeliverFunc), which never blocks; call Resume once at start-up before
// the scheduler settles anything; Run until ctx is done.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	h      jobHeap
	active map[string]bool // watch id + "/" + channel: queued or in flight
	wake   chan struct{}
}

// job is one delivery waiting for its next attempt.
type job struct {
	watchID, channel, messageID string
	attempts                    int   // made so far
	due                         int64 // unix nanoseconds
	w                           *vigil.Watch
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, log: log.With("component", "deliver"), active: map[string]bool{}, wake: make(chan struct{}, 1)}
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

// channels lists the channels an outcome goes to: a webhook for every
// outcome, the command whose "on" names the outcome's class, an email for
// fired and failed only.
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
	d.mu.Lock()
	for _, ch := range channels(o, w.State) {
		if slices.Contains(skip, ch) {
			continue
		}
		d.pushLocked(&job{watchID: w.ID, channel: ch, messageID: messageID, due: now, w: w})
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

// Resume picks up what a previous run left: receipts left "sending" are
// now "unknown" (resent only with retry_unknown), "retrying" ones are due
// at their next rung, and each channel a settled watch asks for that has
// no receipt (never taken by a worker: the daemon stopped while it was
// queued, whatever became of the watch's other channels) is delivered
// now. Call it once, before the scheduler settles anything.
func (d *Dispatcher) Resume(ctx context.Context) error {
	now := d.now()
	p := vigil.ReceiptsResumeParams{Now: now, SettledSince: now.Add(-d.cfg.ResumeWindow),
		Channels: []string{ChannelWebhook, ChannelCommand, ChannelEmail}}
	if len(d.cfg.RecipientWebhooks) > 0 {
		p.DefaultChannels = []string{ChannelWebhook}
	}
	res, err := d.cfg.Store.ReceiptsResume(ctx, p)
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
	ws, err := d.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
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
		if o, err := d.Options(w); err == nil && o.Webhook != nil && o.Webhook.RetryUnknown {
			d.pushLocked(&job{watchID: r.WatchID, channel: r.Channel, messageID: r.MessageID, attempts: r.Attempts, due: now.UnixNano(), w: w})
		}
	}
	for _, r := range res.Retrying {
		d.pushLocked(&job{watchID: r.WatchID, channel: r.Channel, messageID: r.MessageID, attempts: r.Attempts, due: r.NextAt.UnixNano()})
	}
	d.mu.Unlock()
	for _, u := range res.Undispatched {
		if w := byID[u.WatchID]; w != nil {
			d.enqueue(w, u.MessageID, u.Receipted...)
		}
	}
	d.signal()
	return nil
}

// Pending returns how many deliveries are queued or in flight.
func (d *Dispatcher) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.active)
}

// Run delivers until ctx is done, then waits for the attempts in flight
// (each bounded by its channel's timeout) and returns nil. An attempt cut
// short by ctx leaves its receipt "sending", read back as "unknown".
func (d *Dispatcher) Run(ctx context.Context) error {
	work := make(chan *job)
	var wg sync.WaitGroup
	for range d.cfg.Workers {
		wg.Go(func() {
			for j := range work {
				d.attempt(ctx, j)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
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
		var due []*job
		for len(d.h) > 0 && d.h[0].due <= now {
			due = append(due, heap.Pop(&d.h).(*job))
		}
		next, ok := int64(0), len(d.h) > 0
		if ok {
			next = d.h[0].due
		}
		d.mu.Unlock()
		for i, j := range due {
			select {
			case work <- j:
			case <-ctx.Done():
				// Not started: forget them; Resume finds them again
				// (no receipt on that channel, or a retrying one).
				d.mu.Lock()
				for _, k := range due[i:] {
					delete(d.active, k.key())
				}
				d.mu.Unlock()
				return nil
			}
		}
		if len(due) > 0 {
			continue
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

// attempt makes one attempt of j and records its receipt before and after.
func (d *Dispatcher) attempt(ctx context.Context, j *job) {
	log := d.log.With("watch_id", j.watchID, "channel", j.channel)
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
	o, err := d.Options(w)
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
		d.record(ctx, log, j, rec)
		d.finish(j)
		return
	}
	// The receipt exists before anything leaves: a crash from here on
	// reads back as unknown.
	rec.Status, rec.UpdatedAt = vigil.ReceiptSending, d.now()
	if err := d.cfg.Store.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: rec}); err != nil {
		if ctx.Err() == nil {
			log.Error("recording receipt before sending", "err", err)
		}
		d.retryLater(j, storeRetry)
		return
	}
	payload, _ := json.Marshal(NewPayload(w, j.messageID))
	retry, err := ch.Send(ctx, &Delivery{Watch: w, MessageID: j.messageID, Options: o, Payload: payload, Attempt: rec.Attempts, Now: rec.UpdatedAt})
	if err != nil && ctx.Err() != nil {
		// Shutting down mid-send: the receipt stays sending (unknown at
		// the next start); nothing more is known.
		return
	}
	now := d.now()
	rec.UpdatedAt, rec.Detail = now, ""
	var again time.Duration
	switch {
	case err == nil:
		rec.Status = vigil.ReceiptDelivered
	case IsUnknown(err):
		rec.Status, rec.Detail = vigil.ReceiptUnknown, clip(err.Error())
		if j.channel == ChannelWebhook && o.Webhook != nil && o.Webhook.RetryUnknown {
			if wait, ok := NextRetry(rec.Attempts); ok {
				rec.Status, again = vigil.ReceiptRetrying, wait
			}
		}
	case retry:
		if wait, ok := NextRetry(rec.Attempts); ok {
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
	if !d.record(ctx, log, j, rec) {
		return
	}
	if again > 0 {
		j.attempts = rec.Attempts
		d.retryLater(j, again)
		return
	}
	d.finish(j)
}

// record writes a receipt after an attempt; on failure the receipt stays
// as it was (sending: unknown at the next start) and the job is dropped.
func (d *Dispatcher) record(ctx context.Context, log *slog.Logger, j *job, rec vigil.ReceiptRecord) bool {
	if err := d.cfg.Store.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: rec}); err != nil {
		if ctx.Err() == nil {
			log.Error("recording receipt", "status", rec.Status, "err", err)
		}
		d.finish(j)
		return false
	}
	if d.cfg.ReceiptFunc != nil {
		d.cfg.ReceiptFunc(rec.Channel, rec.Status)
	}
	return true
}

func (d *Dispatcher) retryLater(j *job, wait time.Duration) {
	d.mu.Lock()
	j.due = d.now().Add(wait).UnixNano()
	heap.Push(&d.h, j)
	d.mu.Unlock()
	d.signal()
}

func (d *Dispatcher) finish(j *job) {
	d.mu.Lock()
	delete(d.active, j.key())
	d.mu.Unlock()
}

func clip(s string) string {
	if len(s) > maxDetail {
		return s[:maxDetail] + "…"
	}
	return s
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
