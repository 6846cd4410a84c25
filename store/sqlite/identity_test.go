package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// hashWatch is a timer with the identity vigil.Identity gives it: 32 hex
// digits, kept as 16 bytes. Its id is in its predicate, so watches of
// different ids have different identities.
func hashWatch(id, recipient string) *vigil.Watch {
	w := timerWatch(id, recipient)
	w.Predicate = []byte(`{"at":"2026-01-02T04:04:05Z","note":"` + id + `"}`)
	w.Identity = vigil.Identity(recipient, w.Kind, vigil.ModeUntil, w.Predicate)
	return w
}

// register creates w and returns the watch it is answered with: w, or
// an existing pending watch of the same identity.
func register(t *testing.T, s *Store, w *vigil.Watch) *vigil.Watch {
	t.Helper()
	got, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w})
	if err != nil {
		t.Fatalf("WatchCreate(%s): %v", w.ID, err)
	}
	return got
}

func registerMany(t *testing.T, s *Store, ws ...*vigil.Watch) []vigil.WatchCreateResult {
	t.Helper()
	ps := make([]vigil.WatchCreateParams, len(ws))
	for i, w := range ws {
		ps[i] = vigil.WatchCreateParams{Watch: w}
	}
	res, err := s.WatchCreateMany(t.Context(), ps)
	if err != nil {
		t.Fatalf("WatchCreateMany: %v", err)
	}
	return res
}

// sameIdentity is a new watch (its own id) with w's identity.
func sameIdentity(w *vigil.Watch, id string) *vigil.Watch {
	c := *w
	c.ID = id
	return &c
}

// settleIn settles watch id (fired) in the writer's transaction, as
// WatchSettle's op does, with no message and no counts: only for ops that
// are rolled back.
func settleIn(t *wtx, id string) error {
	var recipient, state, kind string
	var rowid int64
	var identity any
	if err := t.queryRow(t.watchHead, id).Scan(&recipient, &state, &kind, &rowid, &identity); err != nil {
		return err
	}
	if _, err := t.conn.ExecContext(context.Background(), `UPDATE watches SET state = 'fired', settled_at = 1 WHERE rowid = ?`, rowid); err != nil {
		return err
	}
	t.removeIdentity(identity, rowid)
	return nil
}

// checkIdentities compares the writer's identities with the pending rows:
// the same identities, naming the same rows, and nothing more.
func checkIdentities(t *testing.T, s *Store) {
	t.Helper()
	err := s.w.do(t.Context(), func(w *wtx) error {
		if _, err := w.identities(); err != nil {
			return err
		}
		want, err := readIdentities(context.Background(), w.conn)
		if err != nil {
			return err
		}
		if w.idents.len() != want.len() {
			t.Errorf("the writer holds %d identities, want the %d of the pending rows", w.idents.len(), want.len())
		}
		for k, r := range want.hex {
			if got, ok := w.idents.hex[k]; !ok || got != r {
				t.Errorf("identity %x: row %d (held %v), want %d", k, got, ok, r)
			}
		}
		for k, r := range want.text {
			if got, ok := w.idents.text[k]; !ok || got != r {
				t.Errorf("identity %q: row %d (held %v), want %d", k, got, ok, r)
			}
		}
		if len(w.idents.log) != 0 {
			t.Errorf("%d changes logged between transactions, want none", len(w.idents.log))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIdentitiesAfterEveryWrite: a pending watch's identity answers a new
// registration with the same identity (Existing), through each way in and
// out of pending, for both forms of identity, one by one and in batches,
// and after the store is opened again.
func TestIdentitiesAfterEveryWrite(t *testing.T) {
	for _, form := range []struct {
		name string
		w    func(id, recipient string) *vigil.Watch
	}{{"hash", hashWatch}, {"text", timerWatch}} {
		t.Run(form.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vigil.db")
			s := open(t, path, nil)
			defer func() { s.Close() }()
			ctx := t.Context()
			at := time.Date(2026, 1, 2, 5, 0, 0, 0, time.UTC)

			a := form.w("a", "r")
			register(t, s, a)
			if got := register(t, s, sameIdentity(a, "a2")); got.ID != "a" || !got.Existing {
				t.Errorf("same identity as a pending watch = %s (existing %v), want a", got.ID, got.Existing)
			}
			res := registerMany(t, s, sameIdentity(a, "a3"), form.w("b", "r"), sameIdentity(form.w("b", "r"), "b2"))
			if res[0].Watch.ID != "a" || !res[0].Watch.Existing || res[1].Watch.ID != "b" || res[1].Watch.Existing ||
				res[2].Watch.ID != "b" || !res[2].Watch.Existing {
				t.Errorf("batch answered %s %s %s, want a (existing), b, b (existing)", res[0].Watch.ID, res[1].Watch.ID, res[2].Watch.ID)
			}

			// Settled, cancelled, closed: the identity is free again.
			checkIdentities(t, s)
			won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "a", State: vigil.StateFired, SettledAt: at}})
			if err != nil || !won[0] {
				t.Fatalf("WatchSettle(a) = %v, %v", won, err)
			}
			checkIdentities(t, s)
			if got := register(t, s, sameIdentity(a, "a4")); got.ID != "a4" || got.Existing {
				t.Errorf("same identity as a settled watch = %s (existing %v), want a new a4", got.ID, got.Existing)
			}
			if _, ok, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "a4", SettledAt: at}); err != nil || !ok {
				t.Fatalf("WatchCancel(a4) = %v, %v", ok, err)
			}
			checkIdentities(t, s)
			if got := registerMany(t, s, sameIdentity(a, "a5"))[0].Watch; got.ID != "a5" || got.Existing {
				t.Errorf("same identity as a cancelled watch, in a batch = %s (existing %v), want a new a5", got.ID, got.Existing)
			}
			if _, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "r", SettledAt: at}); err != nil {
				t.Fatal(err)
			}
			checkIdentities(t, s)
			if got := register(t, s, sameIdentity(a, "a6")); got.ID != "a6" || got.Existing {
				t.Errorf("same identity after the recipient closed = %s (existing %v), want a new a6", got.ID, got.Existing)
			}

			// Opened again: read from the rows.
			s.Close()
			s = open(t, path, nil)
			if got := register(t, s, sameIdentity(a, "a7")); got.ID != "a6" || !got.Existing {
				t.Errorf("after Open, same identity as a pending watch = %s (existing %v), want a6", got.ID, got.Existing)
			}
			if got := register(t, s, sameIdentity(form.w("b", "r"), "b3")); got.ID != "b3" || got.Existing {
				t.Errorf("after Open, same identity as a closed watch = %s (existing %v), want a new b3", got.ID, got.Existing)
			}
			checkIdentities(t, s)
			checkCounters(t, s)
		})
	}
}

// TestIdentitiesUndoneWithTheirWrite: a write rolled back, alone (its
// savepoint) or with its whole transaction, takes back what it did to
// the identities: a settlement that did not happen leaves the watch's
// identity taken, a registration that did not happen leaves it free.
func TestIdentitiesUndoneWithTheirWrite(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	a, b := hashWatch("a", "r"), hashWatch("b", "r")
	register(t, s, a)
	register(t, s, b)
	failed := errors.New("failed after its writes")

	// Savepoints: each op rolled back alone, the next op in the same
	// transaction sees the identities as they were.
	errs := batch(t, s,
		func(t *wtx) error {
			if err := settleIn(t, "a"); err != nil {
				return err
			}
			return failed
		},
		createOp(sameIdentity(a, "a2"), 0),
		createOp(hashWatch("c", "r"), 0),
		func(*wtx) error { return failed },
	)
	for i, want := range []error{failed, nil, nil, failed} {
		if !errors.Is(errs[i], want) {
			t.Errorf("op %d: %v, want %v", i, errs[i], want)
		}
	}
	if _, err := s.WatchGet(t.Context(), "a2"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("a2, registered after a's settlement was rolled back: %v, want not stored (a is still pending)", err)
	}
	errs = batch(t, s,
		func(t *wtx) error {
			if err := createOp(hashWatch("d", "r"), 0)(t); err != nil {
				return err
			}
			return failed
		},
		createOp(sameIdentity(hashWatch("d", "r"), "d2"), 0),
	)
	if !errors.Is(errs[0], failed) || errs[1] != nil {
		t.Fatalf("ops: %v", errs)
	}
	if w, err := s.WatchGet(t.Context(), "d2"); err != nil || w.State != vigil.StatePending {
		t.Errorf("d2, registered after d's registration was rolled back: %v, %v; want pending", w, err)
	}

	// The whole transaction: its commit fails.
	s.SetWriteFaultFunc(func() error { return fmt.Errorf("injected") })
	if _, err := s.WatchSettle(t.Context(), []vigil.WatchSettleParams{{ID: "b", State: vigil.StateFired, SettledAt: time.Now()}}); err == nil {
		t.Fatal("WatchSettle with the commit failing: no error")
	}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: hashWatch("e", "r")}); err == nil {
		t.Fatal("WatchCreate with the commit failing: no error")
	}
	s.SetWriteFaultFunc(nil)
	if got := register(t, s, sameIdentity(b, "b2")); got.ID != "b" || !got.Existing {
		t.Errorf("after b's settlement failed to commit, same identity = %s (existing %v), want b", got.ID, got.Existing)
	}
	if got := register(t, s, sameIdentity(hashWatch("e", "r"), "e2")); got.ID != "e2" || got.Existing {
		t.Errorf("after e's registration failed to commit, same identity = %s (existing %v), want a new e2", got.ID, got.Existing)
	}
	checkIdentities(t, s)
	checkCounters(t, s)
}

// TestIdentitiesSeeOtherWriters: a pending watch written by another
// connection to the same file (here a second store; by hand, another
// program) is found by the next registration of its identity: the writer
// reads the identities again when SQLite's data_version says another
// connection committed.
func TestIdentitiesSeeOtherWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	defer s.Close()
	register(t, s, hashWatch("first", "r")) // the writer's transaction has run
	other := open(t, path, nil)
	a := hashWatch("a", "r")
	register(t, other, a)
	other.Close()
	if got := register(t, s, sameIdentity(a, "a2")); got.ID != "a" || !got.Existing {
		t.Errorf("same identity as a watch another connection wrote = %s (existing %v), want a", got.ID, got.Existing)
	}
	if got := registerMany(t, s, sameIdentity(a, "a3"))[0].Watch; got.ID != "a" || !got.Existing {
		t.Errorf("in a batch = %s (existing %v), want a", got.ID, got.Existing)
	}
	checkIdentities(t, s)
}

// TestListPendingAmongManySettled: with pending watches few among the
// rows, WatchListPending visits them through watches_state_created
// (pendingByIndex) and returns them all, and only them.
func TestListPendingAmongManySettled(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	var settle []vigil.WatchSettleParams
	for i := range 12 {
		w := hashWatch(fmt.Sprintf("w%02d", i), "r")
		register(t, s, w)
		if i%6 != 0 {
			settle = append(settle, vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, SettledAt: w.CreatedAt.Add(time.Hour)})
		}
	}
	if _, err := s.WatchSettle(t.Context(), settle); err != nil {
		t.Fatal(err)
	}
	got, err := s.WatchListPending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	if want := []string{"w00", "w06"}; !slices.Equal(ids, want) {
		t.Errorf("WatchListPending = %v, want %v", ids, want)
	}
}

// storeHolding makes a store file holding ws, pending, and closes it; it
// returns its path, for a test of what a store opened on it does.
func storeHolding(t *testing.T, ws ...*vigil.Watch) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	defer s.Close()
	for _, w := range ws {
		register(t, s, w)
	}
	return path
}

// takeOffer takes WatchListPending's offer from the writer's way.
func takeOffer(t *testing.T, s *Store) identityOffer {
	t.Helper()
	select {
	case o := <-s.w.offer:
		return o
	case <-time.After(10 * time.Second): // a failure guard only: it is there at once
		t.Fatal("WatchListPending offered the writer no identities")
		return identityOffer{}
	}
}

// TestIdentitiesFromThePrimingRead: the identities WatchListPending reads
// beside its list reach the writer, which then reads none of its own;
// and an offer older than a commit that changed identities, or than a
// commit by another program, is not taken.
func TestIdentitiesFromThePrimingRead(t *testing.T) {
	a := hashWatch("a", "r")
	path := storeHolding(t, a, hashWatch("b", "r"))

	loads := func(s *Store) (n int) {
		t.Helper()
		if err := s.w.do(t.Context(), func(w *wtx) error { n = w.loads; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Taken: no read of the writer's own.
	s := open(t, path, nil)
	if _, err := s.WatchListPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := register(t, s, sameIdentity(a, "a2")); got.ID != "a" || !got.Existing {
		t.Errorf("after priming, same identity = %s (existing %v), want a", got.ID, got.Existing)
	}
	if n := loads(s); n != 0 {
		t.Errorf("the writer read the identities %d times, want 0: it had WatchListPending's", n)
	}
	checkIdentities(t, s)
	s.Close()

	// Older than a cancel committed before the writer took it.
	s = open(t, path, nil)
	if _, err := s.WatchListPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	o := takeOffer(t, s) // held back while a commit changes identities
	if _, ok, err := s.WatchCancel(t.Context(), vigil.WatchCancelParams{ID: "a", SettledAt: time.Now()}); err != nil || !ok {
		t.Fatalf("WatchCancel(a) = %v, %v", ok, err)
	}
	s.w.offer <- o
	checkIdentities(t, s)
	if n := loads(s); n != 1 {
		t.Errorf("the writer read the identities %d times, want 1: the offer predates the cancel", n)
	}
	s.Close()

	// Older than a commit of another program.
	s = open(t, path, nil)
	if _, err := s.WatchListPending(t.Context()); err != nil {
		t.Fatal(err)
	}
	o = takeOffer(t, s)
	other := open(t, path, nil)
	c := hashWatch("c", "r")
	register(t, other, c)
	other.Close()
	s.w.offer <- o
	if got := register(t, s, sameIdentity(c, "c2")); got.ID != "c" || !got.Existing {
		t.Errorf("same identity as another program's watch = %s (existing %v), want c", got.ID, got.Existing)
	}
	checkIdentities(t, s)
	s.Close()
}

// TestIdentitiesReadInARolledBackTransaction: identities read in a
// transaction after some of its writes go with them when it is rolled
// back: a watch whose settlement was rolled back keeps its identity.
func TestIdentitiesReadInARolledBackTransaction(t *testing.T) {
	x := hashWatch("x", "r")
	s := open(t, storeHolding(t, x), nil) // the writer holds no identities yet
	defer s.Close()
	s.SetWriteFaultFunc(func() error { return errors.New("injected") })
	errs := batch(t, s,
		func(t *wtx) error { return settleIn(t, "x") }, // before they are read: noted only
		createOp(hashWatch("y", "r"), 0),               // reads them, with x settled
	) // and the commit fails
	s.SetWriteFaultFunc(nil)
	for i, err := range errs {
		if err == nil {
			t.Errorf("op %d: no error, want the commit's", i)
		}
	}
	if got := register(t, s, sameIdentity(x, "x2")); got.ID != "x" || !got.Existing {
		t.Errorf("after x's settlement was rolled back, same identity = %s (existing %v), want x", got.ID, got.Existing)
	}
	checkIdentities(t, s)
}

// TestIdentitiesWithAWrongCount: a pending count far above the rows (a
// counters row damaged or written by hand) sizes nothing by it.
func TestIdentitiesWithAWrongCount(t *testing.T) {
	t.Run("count", func(t *testing.T) { identitiesWithAWrongCount(t, false) })
	// The row moved to a rowid far past the others: the rowids bound
	// nothing then.
	t.Run("count and rowid", func(t *testing.T) { identitiesWithAWrongCount(t, true) })
}

func identitiesWithAWrongCount(t *testing.T, rowid bool) {
	a := hashWatch("a", "r")
	path := storeHolding(t, a)
	db := openRaw(t, path)
	if _, err := db.ExecContext(t.Context(), `UPDATE counters SET pending = 1 << 44 WHERE recipient = ''`); err != nil {
		t.Fatal(err)
	}
	if rowid {
		if _, err := db.ExecContext(t.Context(), `UPDATE watches SET rowid = 1 << 44 WHERE id = 'a'`); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, path, nil)
	if got, err := s.WatchListPending(t.Context()); err != nil || len(got) != 1 {
		t.Fatalf("WatchListPending = %d entries, %v; want 1", len(got), err)
	}
	if got := register(t, s, sameIdentity(a, "a2")); got.ID != "a" || !got.Existing {
		t.Errorf("same identity = %s (existing %v), want a", got.ID, got.Existing)
	}
	s.Close()
	s = open(t, path, nil) // and the writer's own read
	defer s.Close()
	if got := register(t, s, sameIdentity(a, "a3")); got.ID != "a" || !got.Existing {
		t.Errorf("same identity = %s (existing %v), want a", got.ID, got.Existing)
	}
}

// TestIdentitiesFromAPrimingReadOfManyRows: the priming read hands the
// identities to a goroutine of their own a chunk at a time; every one
// reaches the writer, of whole chunks and of the last, as do identities
// that are not vigil.Identity's.
func TestIdentitiesFromAPrimingReadOfManyRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	n := int64(identityFillChunks*identityFillChunk + identityFillChunk/2)
	bulkInsert(t, s, 0, n)
	own := hashWatch("own", "r")
	own.Identity = "an identity of the caller's own"
	register(t, s, own)
	s.Close()

	s = open(t, path, nil)
	defer s.Close()
	rows, err := s.WatchListPending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rows)) != n+1 {
		t.Fatalf("WatchListPending: %d rows, want %d", len(rows), n+1)
	}
	checkIdentities(t, s)
	var loads int
	if err := s.w.do(t.Context(), func(w *wtx) error { loads = w.loads; return nil }); err != nil {
		t.Fatal(err)
	}
	if loads != 0 {
		t.Errorf("the writer read the identities %d times, want 0: it had WatchListPending's", loads)
	}
}

// TestIdentitiesThatReadAsNumbers: an identity of the caller's own that
// SQLite could take for a number (the column has NUMERIC affinity) is kept
// as given, read back as given, and unique among pending watches, one by
// one, in batches and after a restart; and one written as a number before
// is found by its decimal text.
func TestIdentitiesThatReadAsNumbers(t *testing.T) {
	// SQLite reads text as a number up to its first NUL: "1\x00b" too.
	for _, ident := range []string{"42", "007", " 7", "1.5", "-0", "1e3", "123456789012345", "1234567890123456", "1-2", "0x10", "text",
		"1\x00", "1\x00b", " 9\n\x00", "+1\x00", "a\x00b", "\x001"} {
		t.Run(ident, func(t *testing.T) {
			a := hashWatch("a", "r")
			a.Identity = ident
			path := storeHolding(t, a)
			s := open(t, path, nil)
			if got := register(t, s, sameIdentity(a, "a2")); got.ID != "a" || !got.Existing {
				t.Errorf("same identity = %s (existing %v), want a", got.ID, got.Existing)
			}
			if res := registerMany(t, s, sameIdentity(a, "a3")); res[0].Watch.ID != "a" || !res[0].Watch.Existing {
				t.Errorf("same identity in a batch = %s (existing %v), want a", res[0].Watch.ID, res[0].Watch.Existing)
			}
			w, err := s.WatchGet(t.Context(), "a")
			if err != nil || w.Identity != ident {
				t.Errorf("WatchGet(a).Identity = %q, %v; want %q", w.Identity, err, ident)
			}
			checkIdentities(t, s)
			s.Close()

			s = open(t, path, nil) // the priming read's
			defer s.Close()
			if _, err := s.WatchListPending(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := register(t, s, sameIdentity(a, "a4")); got.ID != "a" || !got.Existing {
				t.Errorf("after a restart, same identity = %s (existing %v), want a", got.ID, got.Existing)
			}
			if _, ok, err := s.WatchCancel(t.Context(), vigil.WatchCancelParams{ID: "a", SettledAt: time.Now()}); err != nil || !ok {
				t.Fatalf("WatchCancel(a) = %v, %v", ok, err)
			}
			if got := register(t, s, sameIdentity(a, "a5")); got.ID != "a5" || got.Existing {
				t.Errorf("once a ended, same identity = %s (existing %v), want a5 new", got.ID, got.Existing)
			}
			checkIdentities(t, s)
		})
	}
	t.Run("written as a number", func(t *testing.T) {
		a := hashWatch("a", "r")
		path := storeHolding(t, a)
		db := openRaw(t, path)
		if _, err := db.ExecContext(t.Context(), `UPDATE watches SET identity = 42 WHERE id = 'a'`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s := open(t, path, nil)
		defer s.Close()
		b := hashWatch("b", "r")
		b.Identity = "42"
		if got := register(t, s, b); got.ID != "a" || !got.Existing {
			t.Errorf("identity 42 = %s (existing %v), want a", got.ID, got.Existing)
		}
		if w, err := s.WatchGet(t.Context(), "a"); err != nil || w.Identity != "42" {
			t.Errorf("WatchGet(a).Identity = %q, %v; want 42", w.Identity, err)
		}
	})
}
