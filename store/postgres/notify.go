package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/jsonscan"
)

// Kinds of Event.
const (
	// EventWatch: a watch was registered or cancelled (WatchID).
	EventWatch = "watch"
	// EventClose: a recipient was closed: its pending watches were
	// cancelled (Recipient).
	EventClose = "close"
	// EventMessage: a message was appended to a mailbox (Recipient, Seq,
	// WatchID for a watch's message).
	EventMessage = "message"
	// EventResync: the listener has (re)connected; events sent while it
	// was not connected are lost, so whatever depends on them must be read
	// again from the tables. Always the first event of Listen.
	EventResync = "resync"
	// EventCheck: someone asked for a probe of a watch now (WatchID,
	// Shard); the replica holding its shard makes it.
	EventCheck = "check"
	// EventRebalance: a replica joined, released shards or left; the
	// others run their lease step now rather than at their next renewal.
	EventRebalance = "rebalance"
)

// Event is one change made through a store with Options.Notify, as Listen
// hears it on any store of the same database and schema.
type Event struct {
	Kind      string `json:"k"`
	WatchID   string `json:"w,omitempty"`
	Recipient string `json:"r,omitempty"`
	Seq       int64  `json:"s,omitempty"`
	// Shard is the shard of WatchID (ShardOf), for EventWatch and
	// EventCheck.
	Shard int `json:"h,omitempty"`
	// Origin is the store that sent it (Store.Origin), for EventWatch.
	Origin string `json:"o,omitempty"`
	// Sched, on the EventWatch of a registration, is what the holder of
	// the watch's shard needs to schedule it (Watch), so that it need not
	// read the row back; nil when the payload would not fit, or from a
	// build that did not send it: the holder reads the row.
	Sched *Sched `json:"a,omitempty"`
	// Gone, on the EventWatch of a cancel: the watch is no longer pending
	// (and never will be again).
	Gone bool `json:"x,omitempty"`
	// Message, on the EventWatch of a settlement made by a replica that
	// does not hold the watch's shard (a completion,
	// vigil.WatchSettleParams.Answered), is the id of its outcome
	// message: the holder delivers it.
	Message string `json:"m,omitempty"`
}

// Sched is the schedule of a watch just registered, as stored: times in
// Unix milliseconds (0: none), durations in milliseconds.
type Sched struct {
	Kind      string `json:"k"`
	Every     int64  `json:"e,omitempty"`
	StartAt   int64  `json:"s,omitempty"`
	Deadline  int64  `json:"d,omitempty"`
	CreatedAt int64  `json:"c,omitempty"`
	Polls     int    `json:"p,omitempty"`
	Errors    int    `json:"r,omitempty"`
	// Consecutive is the watch's ConsecutiveErrors.
	Consecutive int `json:"q,omitempty"`
}

// maxPayload bounds a notification's payload: PostgreSQL refuses one of
// 8 000 bytes or more.
const maxPayload = 7999

// Watch returns the pending watch ev registered, with what the scheduler
// needs to arm it (no predicate, note or delivery: a probe reads the
// row), or nil when ev does not carry it (Sched).
func (ev Event) Watch() *vigil.Watch {
	if ev.Kind != EventWatch || ev.Sched == nil || ev.WatchID == "" || ev.Gone {
		return nil
	}
	a := ev.Sched
	return &vigil.Watch{ID: ev.WatchID, Recipient: ev.Recipient, Kind: vigil.Kind(a.Kind), State: vigil.StatePending,
		Every: time.Duration(a.Every) * time.Millisecond, StartAt: fromMS(a.StartAt), Deadline: fromMS(a.Deadline),
		CreatedAt: fromMS(a.CreatedAt), Polls: a.Polls, Errors: a.Errors, ConsecutiveErrors: a.Consecutive}
}

// fromMS is the UTC time of Unix milliseconds ms, or the zero time for 0.
func fromMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// toMS is t in Unix milliseconds, or 0 for the zero time.
func toMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// createdEvent is the payload of the EventWatch of w's registration, with
// its schedule when that fits (w as stored: times to the millisecond).
func (s *Store) createdEvent(w *vigil.Watch) (string, error) {
	ev := Event{Kind: EventWatch, WatchID: w.ID, Recipient: w.Recipient, Shard: ShardOf(w.ID), Origin: s.origin,
		Sched: &Sched{Kind: string(w.Kind), Every: w.Every.Milliseconds(), StartAt: toMS(w.StartAt), Deadline: toMS(w.Deadline),
			CreatedAt: toMS(w.CreatedAt), Polls: w.Polls, Errors: w.Errors, Consecutive: w.ConsecutiveErrors}}
	b, err := json.Marshal(ev)
	if err != nil {
		return "", err
	}
	if len(b) > maxPayload {
		ev.Sched = nil
		if b, err = json.Marshal(ev); err != nil {
			return "", err
		}
	}
	return string(b), nil
}

// Origin identifies this store among those sending events on the same
// schema (Event.Origin): random, drawn when it was opened.
func (s *Store) Origin() string { return s.origin }

// listenReconnect is how long Listen waits before it connects again after
// losing its connection.
const listenReconnect = time.Second

// Channel is the NOTIFY channel of the store's schema, which Listen
// listens on.
func (s *Store) Channel() string { return s.channel }

// channelOf is the NOTIFY channel of schema.
func channelOf(schema string) string {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("vigil_%08x", h.Sum32())
}

// notify queues ev on tx: PostgreSQL delivers it when tx commits, and never
// if it rolls back. A store without Options.Notify sends nothing.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, evs ...Event) error {
	if !s.sendEvents || len(evs) == 0 {
		return nil
	}
	// One statement, however many events (a settlement of 512 timers
	// sends 512): each is its own notification, in order, as listeners of
	// any version read them.
	ps := make([]string, len(evs))
	for i, ev := range evs {
		p, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		ps[i] = string(p)
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS e(p, n) ORDER BY n`, s.Channel(), ps)
	return err
}

// Listen calls fn with each Event sent by the stores with Options.Notify on
// the same database and schema (this one included), from its own
// connection, until ctx ends (nil). fn runs on Listen's goroutine and
// should not block for long. The first event, and the first after every
// reconnection, is EventResync: a notification sent while no connection
// listened is lost, so a listener repairs from the tables then. A payload
// that does not decode is skipped.
func (s *Store) Listen(ctx context.Context, fn func(Event)) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) },
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				s.log.Warn("listening for other daemons' changes", "err", err)
			}
		},
		ReconnectDelay: listenReconnect,
	}
	l.Handle(s.Channel(), listenHandler(fn))
	if err := l.Listen(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	return nil
}

type listenHandler func(Event)

func (h listenHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	var ev Event
	if quickEvent([]byte(n.Payload), &ev) {
		h(ev)
		return nil
	}
	ev = Event{}
	if err := json.Unmarshal([]byte(n.Payload), &ev); err != nil {
		return fmt.Errorf("notification %q: %w", n.Payload, err)
	}
	h(ev)
	return nil
}

// HandleBacklog is called once LISTEN is in place after each connect.
func (h listenHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h(Event{Kind: EventResync})
	return nil
}

// quickEvent decodes payload into ev without reflection when it reads all
// of it exactly as encoding/json would (a message's event, every storm's
// most frequent, is one); it reports false for anything else (a
// registration's schedule, a key it does not know, an escape, a seq past
// nine digits), and the caller leaves the payload to encoding/json.
func quickEvent(payload []byte, ev *Event) bool {
	s := jsonscan.Scanner{B: payload}
	s.Space()
	ok := s.Object(func(key string) bool {
		var ok bool
		switch key {
		case "k":
			ev.Kind, ok = s.PlainString()
		case "w":
			ev.WatchID, ok = s.PlainString()
		case "r":
			ev.Recipient, ok = s.PlainString()
		case "o":
			ev.Origin, ok = s.PlainString()
		case "s":
			ev.Seq, ok = s.Int64()
		case "h":
			ev.Shard, ok = s.Integer()
		case "x":
			ev.Gone, ok = s.Boolean()
		case "m":
			ev.Message, ok = s.PlainString()
		case "a":
			// A registration's schedule: most of the events a replica
			// hears. A key given twice fills one Sched, as
			// encoding/json does.
			if ev.Sched == nil {
				ev.Sched = new(Sched)
			}
			ok = quickSched(&s, ev.Sched)
		}
		return ok
	})
	return ok && s.End()
}

// quickSched reads a Sched's object as quickEvent reads an Event's.
func quickSched(s *jsonscan.Scanner, a *Sched) bool {
	return s.Object(func(key string) bool {
		var ok bool
		switch key {
		case "k":
			a.Kind, ok = s.PlainString()
		case "e":
			a.Every, ok = s.Int64()
		case "s":
			a.StartAt, ok = s.Int64()
		case "d":
			a.Deadline, ok = s.Int64()
		case "c":
			a.CreatedAt, ok = s.Int64()
		case "p":
			a.Polls, ok = s.Integer()
		case "r":
			a.Errors, ok = s.Integer()
		case "q":
			a.Consecutive, ok = s.Integer()
		}
		return ok
	})
}

// sqlEventsAsync makes the transaction it runs in commit without waiting
// for the WAL's flush (it writes nothing but notifications).
const sqlEventsAsync = `SELECT set_config('synchronous_commit', 'off', true)`

// queueEvents queues on b, after the commit of the transaction that wrote
// what they tell, its events (payloads of Event), in a transaction of
// their own: PostgreSQL serializes the commits of every transaction that
// notifies, WAL flush included, on one lock of the database, so
// registrations that notified in their own transaction committed one at a
// time across every replica. This one commits without waiting for the
// flush and holds the lock for microseconds. A registration whose events
// are lost (the daemon dies between the two commits) is found by its
// shard's holder at its next lease step (see heartbeat's repair scan), as
// one whose notification a listener missed. A store without
// Options.Notify sends nothing.
func (s *Store) queueEvents(b *pgx.Batch, evs []string) {
	if !s.sendEvents || len(evs) == 0 {
		return
	}
	b.Queue(sqlEventsAsync)
	b.Queue(sqlNotifyMany, s.Channel(), evs)
}

// eventsSent reads the results of the n statements queueEvents queued
// last on a batch: a failure is logged, not returned, since what they tell
// is committed already.
func (s *Store) eventsSent(br pgx.BatchResults, n int) {
	var err error
	for range n {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.log.Warn("events of a committed registration not sent: the holders of its shards will find it at their next lease step", "err", err)
		s.touchReplica()
	}
}

// touchReplica rewrites this replica's row as it is (a new version of it),
// which every replica's next lease step reads as a change: its heartbeat is then a
// full one, whose repair scan finds what a lost notification did not say,
// rather than a quick one (HeartbeatParams.Quick), which would leave it to
// the next full heartbeat (a minute at the default renewal). A failure is
// logged; that full heartbeat still finds it.
func (s *Store) touchReplica() {
	if s.replica == "" || !s.sessionLeases {
		return // no heartbeat is quick
	}
	ctx, cancel := context.WithTimeout(context.Background(), touchTimeout)
	defer cancel()
	if _, err := s.leasePool.Exec(ctx, `UPDATE replicas SET lock_key = lock_key WHERE id = $1`, s.replica); err != nil {
		s.log.Warn("telling the other replicas to look for a registration whose events were not sent: they find it within a minute", "err", err)
	}
}

// touchTimeout bounds touchReplica's write.
const touchTimeout = 2 * time.Second
