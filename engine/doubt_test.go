package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

var errLostReply = errors.New("simulated: the connection closed before COMMIT's answer came")

// lostReplyStore fails the first settlement it is given. written says
// whether that settlement was written all the same, and when: at once
// (COMMIT's answer lost with its connection), or only just before the next
// settlement (a COMMIT still on its way when the error came back).
type lostReplyStore struct {
	vigil.Store
	written string // "now", "later" or "never"

	mu     sync.Mutex
	failed bool
	held   []vigil.WatchSettleParams
}

func (s *lostReplyStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		if _, err := s.Store.WatchSettle(ctx, s.held); err != nil {
			return nil, err
		}
		s.held = nil
	}
	if s.failed {
		return s.Store.WatchSettle(ctx, ps)
	}
	s.failed = true
	switch s.written {
	case "now":
		if _, err := s.Store.WatchSettle(ctx, ps); err != nil {
			return nil, err
		}
	case "later":
		s.held = ps
	}
	return nil, errLostReply
}

// delivered records what the engine hands to its DeliverFunc.
type delivered struct {
	mu  sync.Mutex
	got []string // watch id / message id
}

func (d *delivered) deliver(w *vigil.Watch, m *vigil.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := ""
	if m != nil {
		id = m.ID
	}
	d.got = append(d.got, w.ID+"/"+id)
}

func (d *delivered) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// TestSettlementInDoubtHandedOn: a settlement whose commit failed but was
// written is handed to the push deliveries, and announced, exactly once
// and with the message written, when the watch is next looked at, on each
// path that looks (a timer's, a probed watch's) and whenever the write
// became visible; one that was not written is made again and handed on
// once, as any other.
func TestSettlementInDoubtHandedOn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		kind    vigil.Kind
		written string
	}{
		{"timer written", vigil.KindTimer, "now"},
		{"timer written later", vigil.KindTimer, "later"},
		{"timer not written", vigil.KindTimer, "never"},
		{"probed written", vigil.KindHTTP, "now"},
		{"probed written later", vigil.KindHTTP, "later"},
		{"probed not written", vigil.KindHTTP, "never"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d delivered
			st := &lostReplyStore{Store: memstore.New(), written: tt.written}
			v := newEnv(t, envOpts{store: st, deliver: d.deliver,
				watchers: []watcher.Watcher{watchertest.SettlesAfter(vigil.KindHTTP, 1)}})
			evs, err := v.eng.Subscribe(v.ctx, vigil.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			r := vigil.RegisterRequest{Kind: tt.kind, Predicate: obj(`{"in":"1m"}`), Deliver: obj(`{"webhook":{"url":"https://hooks.example/in"}}`)}
			if tt.kind == vigil.KindHTTP {
				r.Predicate, r.Every = obj(`{}`), "1m"
			}
			w := v.register(r)
			v.tick(t0.Add(time.Minute))
			if got := d.list(); len(got) != 0 {
				t.Fatalf("handed on %v after a commit that failed", got)
			}
			// The next looks: the retry comes a second or an interval
			// later.
			v.tickEach(time.Second, t0.Add(3*time.Minute))

			msgs := v.messages(w.Recipient)
			if len(msgs) != 1 {
				t.Fatalf("mailbox holds %d messages, want the outcome once", len(msgs))
			}
			got := d.list()
			if want := w.ID + "/" + msgs[0].ID; len(got) != 1 || got[0] != want {
				t.Fatalf("handed on %v, want once %s: the settlement written, with its message", got, want)
			}
			if s := v.get(w.ID).State; s == vigil.StatePending {
				t.Fatalf("watch still pending")
			}
			// The stream is in order: every event of w comes before the
			// creation of a watch registered after it all.
			sentinel := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1h"}`)})
			settled, messages := 0, 0
			for done := false; !done; {
				select {
				case ev := <-evs:
					if ev.Type == vigil.EventWatchSettled && ev.WatchID == w.ID {
						settled++
					}
					if ev.Type == vigil.EventMessage && ev.WatchID == w.ID {
						// Told with no seq (0): the stream reads it
						// from the mailbox, seq and all.
						if ev.Seq != msgs[0].Seq {
							t.Errorf("the outcome's message.created has seq %d, want %d", ev.Seq, msgs[0].Seq)
						}
						messages++
					}
					done = ev.Type == vigil.EventWatchCreated && ev.WatchID == sentinel.ID
				case <-time.After(10 * time.Second):
					t.Fatal("the event stream never carried the next registration")
				}
			}
			if settled != 1 || messages != 1 {
				t.Fatalf("watch.settled announced %d times and message.created %d, want each once", settled, messages)
			}
		})
	}
}
