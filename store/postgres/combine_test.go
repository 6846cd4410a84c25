package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
)

// holdFirst starts a registration on s that waits on a row lock the
// returned release lets go, so that the registrations submitted meanwhile
// wait in line (s registers on one transaction at a time); it returns
// once that registration is in flight, with a function that waits for its
// answer.
func holdFirst(t *testing.T, s *Store) (release func(), first func() (*vigil.Watch, error)) {
	t.Helper()
	ctx := context.Background()
	if s.creates.max != 1 {
		t.Fatalf("store registers on %d transactions at once, want 1 (a pool of 2 or 3)", s.creates.max)
	}
	w := benchWatch(0)
	w.ID, w.Recipient = "held", "held-recipient"
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := s.pool.Exec(ctx, `INSERT INTO counters (recipient, pending, created_at) VALUES ($1, 0, 0)`, w.Recipient); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM counters WHERE recipient = $1 FOR UPDATE`, w.Recipient); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		w   *vigil.Watch
		err error
	}
	done := make(chan answer, 1)
	go func() {
		got, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000})
		done <- answer{got, err}
	}()
	waitFor(t, "the first registration to wait on the lock", func() bool {
		var n int
		// On the holder's connection: the pool's other one is the
		// registration's.
		err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n)
		return err == nil && n > 0
	})
	return func() { tx.Rollback(ctx) }, func() (*vigil.Watch, error) { a := <-done; return a.w, a.err }
}

// waitFor polls cond until it holds, for at most a minute: it waits for
// goroutines and the database to reach a state, not for time to pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued is how many registrations wait in line on s.
func queued(s *Store) int {
	s.creates.mu.Lock()
	defer s.creates.mu.Unlock()
	return len(s.creates.queue)
}

// TestRegistrationsShareATransaction: registrations made while the
// store's registration transaction is in flight wait, and the next
// transaction takes them all, resolving them in the order they came as if
// made one after the other: a second registration of an identity finds
// the first (Existing), a key used again replays (Replayed), a key used
// for another request is refused, and a recipient's cap refuses the
// registrations past it, each alone.
func TestRegistrationsShareATransaction(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	release, first := holdFirst(t, s)

	type reg struct {
		id, recipient, key, hash string
		pred                     int64
	}
	regs := []reg{
		{id: "a1", recipient: "ra", pred: 1},
		{id: "a2", recipient: "ra", pred: 1},                      // same identity as a1
		{id: "b1", recipient: "rb", pred: 2, key: "k", hash: "h"}, // keyed
		{id: "b2", recipient: "rb", pred: 3, key: "k", hash: "h"}, // replays b1
		{id: "b3", recipient: "rb", pred: 4, key: "k", hash: "x"}, // another request, same key
		{id: "c1", recipient: "rc", pred: 5},
		{id: "c2", recipient: "rc", pred: 6},
		{id: "c3", recipient: "rc", pred: 7}, // past rc's cap of 2
	}
	type answer struct {
		w   *vigil.Watch
		err error
	}
	answers := make([]chan answer, len(regs))
	for i, r := range regs {
		answers[i] = make(chan answer, 1)
		w := benchWatch(r.pred)
		w.ID, w.Recipient = r.id, r.recipient
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		p := vigil.WatchCreateParams{Watch: w, IdempotencyKey: r.key, RequestHash: r.hash,
			IdempotencySince: benchAt.Add(-time.Hour), MaxActive: 1000, MaxActivePerRecipient: 2}
		go func() {
			got, err := s.WatchCreate(ctx, p)
			answers[i] <- answer{got, err}
		}()
		// In order: each waits in line before the next is made.
		waitFor(t, fmt.Sprintf("registration %s to wait in line", r.id), func() bool { return queued(s) == i+1 })
	}
	release()
	if _, err := first(); err != nil {
		t.Fatalf("the held registration: %v", err)
	}
	got := make([]answer, len(regs))
	for i := range regs {
		got[i] = <-answers[i]
	}
	if g, n := s.creates.groups.Load(), s.creates.grouped.Load(); g != 1 || n != int64(len(regs)) {
		t.Errorf("%d transactions of registrations held %d; want 1 holding all %d", g, n, len(regs))
	}
	want := []struct {
		id             string
		existing, repl bool
		code           vigil.Code
	}{
		{id: "a1"},
		{id: "a1", existing: true},
		{id: "b1"},
		{id: "b1", repl: true},
		{code: vigil.CodeIdempotencyConflict},
		{id: "c1"},
		{id: "c2"},
		{code: vigil.CodeQuotaExceeded},
	}
	for i, w := range want {
		a := got[i]
		if w.code != "" {
			if vigil.ErrorCode(a.err) != w.code {
				t.Errorf("%s: %v, want %s", regs[i].id, a.err, w.code)
			}
			continue
		}
		if a.err != nil {
			t.Errorf("%s: %v", regs[i].id, a.err)
			continue
		}
		if a.w.ID != w.id || a.w.Existing != w.existing || a.w.Replayed != w.repl {
			t.Errorf("%s: watch %s existing %v replayed %v; want %s, %v, %v", regs[i].id, a.w.ID, a.w.Existing, a.w.Replayed, w.id, w.existing, w.repl)
		}
	}
	page, err := s.WatchList(ctx, vigil.WatchListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Watches) != 5 { // held, a1, b1, c1, c2
		t.Errorf("%d watches stored, want 5", len(page.Watches))
	}
}

// TestGroupRefusedByTheServer: when the server refuses a shared
// transaction for one registration's sake (here a trigger refuses one
// note), the others are made all the same, each alone, and only that one
// fails.
func TestGroupRefusedByTheServer(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.note = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF; RETURN NEW; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE TRIGGER refuse_poison BEFORE INSERT ON watches FOR EACH ROW EXECUTE FUNCTION refuse_poison()`); err != nil {
		t.Fatal(err)
	}
	release, first := holdFirst(t, s)
	errs := make([]chan error, 3)
	for i := range errs {
		errs[i] = make(chan error, 1)
		w := benchWatch(int64(10 + i))
		w.ID = fmt.Sprintf("p%d", i)
		if i == 1 {
			w.Note = "poison"
		}
		go func() {
			_, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000})
			errs[i] <- err
		}()
		waitFor(t, "a registration to wait in line", func() bool { return queued(s) == i+1 })
	}
	release()
	if _, err := first(); err != nil {
		t.Fatal(err)
	}
	for i := range errs {
		err := <-errs[i]
		if (err != nil) != (i == 1) {
			t.Errorf("registration p%d: %v; want an error for p1 alone", i, err)
		}
	}
	for _, id := range []string{"p0", "p2"} {
		if _, err := s.WatchGet(ctx, id); err != nil {
			t.Errorf("watch %s: %v", id, err)
		}
	}
}

// TestQueuedRegistrationGivenUp: a registration whose caller gives up
// while it waits in line is never made.
func TestQueuedRegistrationGivenUp(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	release, first := holdFirst(t, s)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		w := benchWatch(20)
		w.ID = "given-up"
		_, err := s.WatchCreate(cctx, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000})
		done <- err
	}()
	waitFor(t, "the registration to wait in line", func() bool { return queued(s) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("registration given up: %v, want context.Canceled", err)
	}
	if n := queued(s); n != 0 {
		t.Errorf("%d registrations still in line, want 0", n)
	}
	release()
	if _, err := first(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchGet(ctx, "given-up"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("watch given up: %v, want not_found", err)
	}
}

// TestTakenRegistrationGivenUp: a registration whose caller gives up once
// a transaction of registrations has taken it (here while that
// transaction waits on a row lock, before it writes) is answered with what
// that transaction makes of it, never with an error for a watch the
// database holds.
func TestTakenRegistrationGivenUp(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	// The recipient's counters row, held on a connection of the test's.
	if _, err := s.pool.Exec(ctx, `INSERT INTO counters (recipient, pending, created_at) VALUES ('rq', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	// On a connection outside the store's pool, which the registrations
	// need whole.
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT FROM counters WHERE recipient = 'rq' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	waiting := func() bool {
		var n int
		err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n)
		return err == nil && n > 0
	}

	release, first := holdFirst(t, s)
	cctx, cancel := context.WithCancel(ctx)
	type answer struct {
		w   *vigil.Watch
		err error
	}
	done := make(chan answer, 1)
	go func() {
		w := benchWatch(30)
		w.ID, w.Recipient = "given-up-once-taken", "rq"
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		got, err := s.WatchCreate(cctx, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000})
		done <- answer{got, err}
	}()
	waitFor(t, "the registration to wait in line", func() bool { return queued(s) == 1 })
	release()
	if _, err := first(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its transaction to take it and wait on the row", func() bool { return queued(s) == 0 && waiting() })
	cancel()
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	waitFor(t, "the transaction to end", func() bool {
		s.creates.mu.Lock()
		defer s.creates.mu.Unlock()
		return s.creates.running == 0
	})
	stored, gerr := s.WatchGet(ctx, "given-up-once-taken")
	switch {
	case a.err == nil && (gerr != nil || a.w.ID != stored.ID):
		t.Errorf("caller answered %v; the database holds %v, %v", a.w, stored, gerr)
	case a.err != nil && gerr == nil:
		t.Errorf("caller answered %v, yet the database holds watch %s (%s)", a.err, stored.ID, stored.State)
	}
}

// TestPanicIsAnError: a registration whose transaction panics (a mistake
// of vigil's, here a malformed item) gets an error, on its caller's
// goroutine and on the store's own (a group run for those that waited),
// and the store goes on registering: the panic neither ends the process
// nor leaves a transaction counted as running forever.
func TestPanicIsAnError(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	bad := batchItem{p: vigil.WatchCreateParams{Watch: benchWatch(1)}} // stored nil
	if _, err := s.creates.submit(ctx, s, bad); err == nil {
		t.Error("a registration that panicked on its caller's goroutine: no error")
	}
	release, first := holdFirst(t, s)
	errs := make(chan error, 1)
	go func() {
		_, err := s.creates.submit(ctx, s, bad)
		errs <- err
	}()
	waitFor(t, "the registration to wait in line", func() bool { return queued(s) == 1 })
	release()
	if _, err := first(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil {
		t.Error("a registration that panicked in a group run for it: no error")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w := benchWatch(2)
	w.ID = "after-panics"
	if _, err := s.WatchCreate(cctx, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000}); err != nil {
		t.Errorf("a registration after two that panicked: %v", err)
	}
}
