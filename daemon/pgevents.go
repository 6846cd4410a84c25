package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/postgres"
)

// pgEventsRetry is how long the reader of other daemons' changes waits
// before reading the store again after a failed read.
const pgEventsRetry = time.Second

// pgEventsPage is how many messages one catch-up read takes.
const pgEventsPage = 500

// pgEventsMaxWatches bounds the watches heard of and not yet read; past
// it, the waits read the store again instead (Rewake).
const pgEventsMaxWatches = 4096

// pgEvents brings what the other daemons on the same PostgreSQL database
// commit to this daemon's waits, long-polls, event streams and MCP
// subscriptions, as if committed here: it listens to the store's changes
// (postgres.Store.Listen) and announces them to the engine
// (engine.Announce, AnnounceCreated, AnnounceWatch), reading from the store only what a
// subscriber of this daemon may want. Messages are read in seq order from
// a cursor, so a notification that was lost (the listening connection
// was down: Listen's resync) is repaired by reading on from the cursor,
// and every wait and long-poll reads the store again (engine.Rewake). The
// engine sends an event that reaches it both ways (published here, and
// read back) once.
type pgEvents struct {
	st  *postgres.Store
	eng *engine.Engine
	log *slog.Logger
	// kick has work for loop (capacity 1).
	kick chan struct{}
	// also hears every event too, on the same connection (the shards'
	// listener); it must not block.
	also func(postgres.Event)

	mu      sync.Mutex
	high    int64               // the highest message seq heard of
	want    bool                // a message a subscriber may want was heard of
	resync  bool                // the listener (re)connected: catch up, wake every wait
	rewake  bool                // wake every wait (a recipient closed, too many watches)
	watches map[string]struct{} // watches registered or cancelled, to read
	created []*vigil.Watch      // watches registered, as their events described them
}

func newPGEvents(st *postgres.Store, eng *engine.Engine, log *slog.Logger) *pgEvents {
	return &pgEvents{st: st, eng: eng, log: log.With("component", "replica-events"), kick: make(chan struct{}, 1),
		watches: make(map[string]struct{})}
}

// run listens and announces until ctx ends.
func (p *pgEvents) run(ctx context.Context) error {
	// Where the messages to announce start: read before listening, so
	// that one committed in between is caught up at the first resync.
	var cursor int64
	for {
		var err error
		if cursor, err = p.st.MessagesLastSeq(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn("reading where the mailboxes end; trying again", "err", err, "retry_in", pgEventsRetry)
		if !sleepCtx(ctx, pgEventsRetry) {
			return nil
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	// One connection listens for the daemon: the shards hear on it too.
	g.Go(func() error {
		return p.st.Listen(gctx, func(ev postgres.Event) {
			p.heard(ev)
			if p.also != nil {
				p.also(ev)
			}
		})
	})
	g.Go(func() error { p.loop(gctx, cursor); return nil })
	return g.Wait()
}

// heard records ev for loop; it runs on Listen's goroutine and does not
// block.
func (p *pgEvents) heard(ev postgres.Event) {
	p.mu.Lock()
	switch ev.Kind {
	case postgres.EventResync:
		p.resync = true
	case postgres.EventMessage:
		p.high = max(p.high, ev.Seq)
		if p.eng.Wants(ev.Recipient, ev.WatchID) {
			p.want = true
		}
	case postgres.EventWatch:
		if p.eng.Wants(ev.Recipient, ev.WatchID) {
			if w := ev.Watch(); w != nil {
				// A registration whose event says what watch.created
				// needs: no read (and none at all for one made here,
				// which the engine published).
				if ev.Origin == p.st.Origin() {
					break
				}
				if len(p.created) < pgEventsMaxWatches {
					p.created = append(p.created, w)
				} else {
					p.rewake = true
				}
				break
			}
			if len(p.watches) < pgEventsMaxWatches {
				p.watches[ev.WatchID] = struct{}{}
			} else {
				p.rewake = true
			}
		}
	case postgres.EventClose:
		// Its watches were cancelled without a message: waits on them
		// read their watch again.
		p.rewake = true
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// loop does what heard recorded, from message seq cursor on, until ctx
// ends; a failed read is tried again after pgEventsRetry.
func (p *pgEvents) loop(ctx context.Context, cursor int64) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		p.mu.Lock()
		high, want, resync, rewake, watches, created := p.high, p.want, p.resync, p.rewake, p.watches, p.created
		p.want, p.resync, p.rewake, p.watches, p.created = false, false, false, make(map[string]struct{}), nil
		p.mu.Unlock()

		for _, w := range created {
			p.eng.AnnounceCreated(w)
		}

		var err error
		if want || resync {
			cursor, err = p.catchUp(ctx, cursor)
		} else {
			// Nothing heard of that anyone here wants: the messages
			// up to high need not be read.
			cursor = max(cursor, high)
		}
		for id := range watches {
			if err != nil {
				break
			}
			if err = p.eng.AnnounceWatch(ctx, id); err == nil {
				delete(watches, id)
			}
		}
		if resync || rewake {
			p.eng.Rewake()
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("reading what other daemons committed; trying again", "err", err, "retry_in", pgEventsRetry)
		p.mu.Lock()
		p.want = p.want || want || resync
		for id := range watches {
			if len(p.watches) < pgEventsMaxWatches {
				p.watches[id] = struct{}{}
			}
		}
		p.mu.Unlock()
		if !sleepCtx(ctx, pgEventsRetry) {
			return
		}
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// catchUp announces the messages after cursor that a subscriber may want,
// in seq order, and returns the seq of the last one read.
func (p *pgEvents) catchUp(ctx context.Context, cursor int64) (int64, error) {
	for {
		after := cursor
		page, err := p.st.MessagesRead(ctx, vigil.MessagesReadParams{AllRecipients: true, After: &after, Limit: pgEventsPage})
		if err != nil {
			return cursor, err
		}
		for _, m := range page.Messages {
			if p.eng.Wants(m.Recipient, m.WatchID) {
				p.eng.Announce(m)
			}
			cursor = m.Seq
		}
		if len(page.Messages) < pgEventsPage {
			return cursor, nil
		}
	}
}

// sleepCtx waits d, or less if ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
