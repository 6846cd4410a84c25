package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
)

// listen runs s.Listen until the test ends and returns its events.
func listen(t *testing.T, s *postgres.Store) <-chan postgres.Event {
	t.Helper()
	ch := make(chan postgres.Event, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func(ev postgres.Event) { ch <- ev }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen = %v, want nil once its context ends", err)
		}
	})
	return ch
}

func next(t *testing.T, ch <-chan postgres.Event, want string) postgres.Event {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Kind != want {
			t.Fatalf("event = %+v, want a %s event", ev, want)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s event within 20 s", want)
	}
	return postgres.Event{}
}

// TestListen: a store listening hears, through PostgreSQL, what another
// store on the same schema committed — registrations, messages, cancels,
// closes — and nothing that was rolled back; after its connection is cut
// it reconnects and says resync.
func TestListen(t *testing.T) {
	u := newSchema(t)
	a := open(t, u)
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Notify: true})
	t.Cleanup(func() { a.Close(); b.Close() })
	events := listen(t, a)
	next(t, events, postgres.EventResync)
	ctx := t.Context()

	// Over the cap: rolled back, so nothing is heard of it.
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w0", "r", `{"n":0}`), MaxActivePerRecipient: 1}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, postgres.EventWatch); ev.WatchID != "w0" || ev.Recipient != "r" {
		t.Errorf("event = %+v, want watch w0 of r", ev)
	}
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w1", "r", `{"n":1}`), MaxActivePerRecipient: 1}); vigil.ErrorCode(err) != vigil.CodeQuotaExceeded {
		t.Fatalf("second registration over the cap: %v", err)
	}
	m, err := b.MessageCreate(ctx, &vigil.Message{ID: "m1", Recipient: "r", Type: vigil.MessageNote, Text: "hi", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, postgres.EventMessage); ev.Seq != m.Seq || ev.Recipient != "r" {
		t.Errorf("event = %+v, want message %d of r (the refused registration sent nothing)", ev, m.Seq)
	}
	// A settlement's outcome message is heard too.
	won, err := b.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w0", State: vigil.StateFired, SettledAt: at,
		Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m2", Text: "fired"}}})
	if err != nil || !won[0] {
		t.Fatalf("settle = %v, %v", won, err)
	}
	if ev := next(t, events, postgres.EventMessage); ev.WatchID != "w0" {
		t.Errorf("event = %+v, want w0's outcome message", ev)
	}
	// One answered at creation has no message: it is heard as gone, so
	// that waits on it elsewhere read it.
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w9", "r", `{"n":9}`)}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventWatch)
	won, err = b.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w9", State: vigil.StateFired, SettledAt: at,
		Outcome: &vigil.Outcome{State: vigil.StateFired}, AnsweredAtCreation: true}})
	if err != nil || !won[0] {
		t.Fatalf("settle quietly = %v, %v", won, err)
	}
	if ev := next(t, events, postgres.EventWatch); ev.WatchID != "w9" || !ev.Gone || ev.Recipient != "r" {
		t.Errorf("event = %+v, want w9 gone", ev)
	}
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w2", "q", `{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventWatch)
	if _, _, err := b.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, postgres.EventWatch); ev.WatchID != "w2" {
		t.Errorf("cancel event = %+v, want w2", ev)
	}
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w3", "q", `{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventWatch)
	if _, err := b.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "q", SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	// Each watch closed is gone, as a cancel says, for the holder of its
	// shard; then the close.
	if ev := next(t, events, postgres.EventWatch); ev.WatchID != "w3" || !ev.Gone || ev.Shard != postgres.ShardOf("w3") {
		t.Errorf("close: event = %+v, want w3 gone", ev)
	}
	if ev := next(t, events, postgres.EventClose); ev.Recipient != "q" {
		t.Errorf("close event = %+v, want q", ev)
	}

	// A cancel whose outcome message cannot be written (the watch already
	// has one) rolls back after it queued its event: nothing is heard.
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch("w4", "p", `{"n":4}`)}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventWatch)
	if _, err := b.MessageCreate(ctx, &vigil.Message{ID: "stray", Recipient: "p", WatchID: "w4", Type: vigil.MessageCancelled, Text: "x", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventMessage)
	_, _, err = b.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w4", SettledAt: at, Message: &vigil.Message{ID: "m4", Text: "cancelled"}})
	if vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("cancel with a second outcome message: %v, want conflict", err)
	}
	after, err := b.MessageCreate(ctx, &vigil.Message{ID: "m5", Recipient: "p", Type: vigil.MessageNote, Text: "after", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, postgres.EventMessage); ev.Seq != after.Seq {
		t.Errorf("event = %+v, want message %d: the rolled-back cancel sent nothing", ev, after.Seq)
	}

	// Cut the listener's connection: it comes back and says resync.
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND query = 'listen "' || $1 || '"'`, a.Channel()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ending the listener's session: %d, %v", n, err)
	}
	next(t, events, postgres.EventResync)
	if _, err := b.MessageCreate(ctx, &vigil.Message{ID: "m3", Recipient: "r", Type: vigil.MessageNote, Text: "again", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	next(t, events, postgres.EventMessage)
}

// TestListenSchedule: the event of a registration, single or in a batch,
// carries the watch's schedule as stored (Event.Watch), so the holder of
// its shard arms it without reading the row; a cancel's says the watch is
// gone; both say which store sent them.
func TestListenSchedule(t *testing.T) {
	u := newSchema(t)
	a := open(t, u)
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Notify: true})
	t.Cleanup(func() { a.Close(); b.Close() })
	if a.Origin() == "" || a.Origin() == b.Origin() {
		t.Fatalf("origins %q and %q, want two different ones", a.Origin(), b.Origin())
	}
	events := listen(t, a)
	next(t, events, postgres.EventResync)
	ctx := t.Context()

	// Times to the nanosecond: the store keeps milliseconds.
	created := at.Add(123456789 * time.Nanosecond)
	w1 := timerWatch("w1", "r", `{"n":1}`)
	w1.Kind, w1.Every, w1.CreatedAt = "http", 1500*time.Millisecond, created
	w1.StartAt, w1.Deadline = created.Add(time.Minute), created.Add(time.Hour)
	w2 := timerWatch("w2", "r", `{"n":2}`)
	w3 := timerWatch("w3", "q", `{"n":3}`)
	w3.Deadline = time.Time{}
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w1}); err != nil {
		t.Fatal(err)
	}
	res, err := b.WatchCreateMany(ctx, []vigil.WatchCreateParams{{Watch: w2}, {Watch: w3}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("WatchCreateMany = %v, %v", res, err)
	}
	for _, id := range []string{"w1", "w2", "w3"} {
		ev := next(t, events, postgres.EventWatch)
		if ev.WatchID != id || ev.Origin != b.Origin() || ev.Gone {
			t.Fatalf("event = %+v, want the registration of %s from b (%s)", ev, id, b.Origin())
		}
		row, err := a.WatchGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := &vigil.Watch{ID: row.ID, Recipient: row.Recipient, Kind: row.Kind, State: vigil.StatePending, Every: row.Every,
			StartAt: row.StartAt, Deadline: row.Deadline, CreatedAt: row.CreatedAt, Polls: row.Polls}
		if diff := cmp.Diff(want, ev.Watch()); diff != "" {
			t.Errorf("event of %s: Watch() differs from the row (-row +event):\n%s", id, diff)
		}
	}
	if _, _, err := b.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, postgres.EventWatch); ev.WatchID != "w2" || !ev.Gone || ev.Watch() != nil {
		t.Errorf("cancel event = %+v (Watch() = %v), want w2 gone and no schedule", ev, ev.Watch())
	}
}
