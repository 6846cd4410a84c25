package httpapi_test

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// fake is a small vigil.Service for the API tests: it answers from fixed
// data, records what it was asked, and publishes events on demand.
type fake struct {
	mu sync.Mutex
	// err, when set, is what every call returns.
	err error
	// existing and replayed mark what Register answers.
	existing, replayed bool
	// block makes Wait, a waiting Messages and an observing Register
	// block until their context ends or their timeout passes.
	block bool

	calls
	subs map[*fakeSub]struct{}
}

// calls is what the fake was asked.
type calls struct {
	registered []vigil.RegisterRequest
	list       vigil.ListRequest
	waited     time.Duration
	messages   vigil.MessagesRequest
	acked      vigil.AckRequest
	closed     string
	checked    string
	cancelled  string
	deleted    string
	filter     vigil.EventFilter
	scope      *vigil.Scope // the scope of the last Register, Watch or Watches; nil for the admin
	completed  vigil.CompleteRequest
	noted      vigil.NoteRequest
}

type fakeSub struct {
	f  vigil.EventFilter
	ch chan vigil.Event
}

var _ vigil.Service = (*fake)(nil)

func newFake() *fake { return &fake{subs: make(map[*fakeSub]struct{})} }

// testWatch is the watch the fake answers with: every field the wire shows.
func testWatch(id string) *vigil.Watch {
	created := time.Date(2025, 11, 30, 12, 0, 0, 0, time.UTC)
	return &vigil.Watch{
		ID:        id,
		Kind:      vigil.KindCI,
		Predicate: json.RawMessage(`{"provider":"github","repo":"acme/api","sha":"3f2a9c0d3f2a9c0d3f2a9c0d3f2a9c0d3f2a9c0d"}`),
		Recipient: "agent-7",
		State:     vigil.StatePending,
		Mode:      vigil.ModeUntil,
		Every:     30 * time.Second,
		Deadline:  created.Add(2 * time.Hour),
		CreatedAt: created,
		NextDue:   created.Add(90 * time.Second),
		Polls:     3,
		LastObservation: &vigil.Observation{
			Verdict: vigil.VerdictPending, At: created.Add(60 * time.Second),
			Summary: "2 of 3 checks done, 1 running", Facts: map[string]any{"done": json.Number("2"), "running": json.Number("1")},
		},
		Note:   "merge PR 41 when green",
		Labels: map[string]string{"task": "T-19"},
	}
}

func (f *fake) record(ctx context.Context) {
	if s, ok := vigil.ScopeFrom(ctx); ok {
		f.scope = &s
	} else {
		f.scope = nil
	}
}

func (f *fake) RegisterBatch(ctx context.Context, rs []vigil.RegisterRequest) ([]vigil.BatchResult, error) {
	out := make([]vigil.BatchResult, len(rs))
	for i, r := range rs {
		w, err := f.Register(ctx, r)
		if err != nil {
			out[i] = vigil.BatchResult{Status: vigil.BatchRefused, Err: err}
			continue
		}
		out[i] = vigil.BatchResult{Status: vigil.BatchCreated, Watch: w}
	}
	return out, nil
}

func (f *fake) Register(ctx context.Context, r vigil.RegisterRequest) (*vigil.Watch, error) {
	f.mu.Lock()
	if f.block && r.Observe {
		// Waiting for the first observation, until the call is cut.
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer f.mu.Unlock()
	f.record(ctx)
	f.registered = append(f.registered, r)
	if f.err != nil {
		return nil, f.err
	}
	w := testWatch("01JDZK4V7Q3M2N8P5R6S7T8V9W")
	w.Kind, w.Recipient, w.Note = r.Kind, r.Recipient, r.Note
	w.Existing, w.Replayed = f.existing, f.replayed
	return w, nil
}

func (f *fake) Watch(ctx context.Context, id string) (*vigil.Watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx)
	if f.err != nil {
		return nil, f.err
	}
	if id == "missing" {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no watch %q", id)
	}
	return testWatch(id), nil
}

func (f *fake) Watches(ctx context.Context, q vigil.ListRequest) (vigil.WatchPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx)
	f.list = q
	if f.err != nil {
		return vigil.WatchPage{}, f.err
	}
	return vigil.WatchPage{Watches: []*vigil.Watch{testWatch("w1"), testWatch("w2")}, Next: "w2"}, nil
}

func (f *fake) Why(ctx context.Context, id string) (*vigil.Why, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &vigil.Why{Watch: testWatch(id), Sentence: "1 check is still running."}, nil
}

func (f *fake) Wait(ctx context.Context, id string, timeout time.Duration) (*vigil.Watch, error) {
	f.mu.Lock()
	f.waited = timeout
	err, block := f.err, f.block
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if block {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	w := testWatch(id)
	w.State, w.SettledAt = vigil.StateFired, w.CreatedAt.Add(5*time.Minute)
	w.Outcome = &vigil.Outcome{State: vigil.StateFired, Sentence: "CI passed on acme/api at 3f2a9c0.", Reason: "satisfied"}
	return w, nil
}

func (f *fake) Cancel(ctx context.Context, id string) (*vigil.Watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = id
	if f.err != nil {
		return nil, f.err
	}
	w := testWatch(id)
	w.State = vigil.StateCancelled
	return w, nil
}

func (f *fake) Check(ctx context.Context, id string) (*vigil.Watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = id
	if f.err != nil {
		return nil, f.err
	}
	w := testWatch(id)
	w.Polls = 1
	return w, nil
}

func (f *fake) Delete(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = id
	return f.err
}

func (f *fake) Messages(ctx context.Context, r vigil.MessagesRequest) (vigil.MessagesPage, error) {
	f.mu.Lock()
	f.messages = r
	err, block := f.err, f.block
	f.mu.Unlock()
	if err != nil {
		return vigil.MessagesPage{}, err
	}
	if block && r.Wait > 0 {
		t := time.NewTimer(r.Wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return vigil.MessagesPage{}, ctx.Err()
		case <-t.C:
		}
	}
	return vigil.MessagesPage{Cursor: 4, Messages: []*vigil.Message{{
		Seq: 5, ID: "m5", Recipient: r.Recipient, WatchID: "w1", Type: vigil.MessageFired,
		Text: "CI passed on acme/api at 3f2a9c0.", CreatedAt: time.Date(2025, 11, 30, 12, 5, 0, 0, time.UTC),
	}}}, nil
}

func (f *fake) Ack(ctx context.Context, r vigil.AckRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = r
	return f.err
}

func (f *fake) Note(ctx context.Context, r vigil.NoteRequest) (*vigil.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noted = r
	if f.err != nil {
		return nil, f.err
	}
	return &vigil.Message{Seq: 9, ID: "m9", Recipient: r.Recipient, Type: vigil.MessageNote, Text: r.Title,
		CreatedAt: time.Date(2025, 11, 30, 12, 0, 0, 0, time.UTC)}, nil
}

func (f *fake) CloseRecipient(ctx context.Context, recipient string) (vigil.CloseResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = recipient
	if f.err != nil {
		return vigil.CloseResult{}, f.err
	}
	return vigil.CloseResult{Cancelled: 2}, nil
}

// Subscribe registers a subscriber that publish feeds; its channel is
// closed when ctx ends.
func (f *fake) Subscribe(ctx context.Context, flt vigil.EventFilter) (<-chan vigil.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = flt
	if f.err != nil {
		return nil, f.err
	}
	s := &fakeSub{f: flt, ch: make(chan vigil.Event, 16)}
	f.subs[s] = struct{}{}
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, s)
		close(s.ch)
	})
	return s.ch, nil
}

// publish sends ev to every subscriber whose filter matches.
func (f *fake) publish(ev vigil.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		if (s.f.Recipient == "" || s.f.Recipient == ev.Recipient) && (s.f.WatchID == "" || s.f.WatchID == ev.WatchID) {
			select {
			case s.ch <- ev:
			default:
			}
		}
	}
}

// subscribers returns how many subscriptions are open.
func (f *fake) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// set runs fn with the fake locked, to configure it.
func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// snapshot returns a copy of what the fake recorded.
func (f *fake) snapshot() calls {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	c.registered = append([]vigil.RegisterRequest(nil), f.registered...)
	return c
}

func (f *fake) Complete(ctx context.Context, r vigil.CompleteRequest) (*vigil.Watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = r
	if f.err != nil {
		return nil, f.err
	}
	return &vigil.Watch{ID: "w1", State: vigil.StateFired, Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "The completion token is done."}}, nil
}
