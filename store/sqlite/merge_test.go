package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// whileHeld runs calls while the writer is held by an op of its own, each
// queued after the one before, then lets them all through in one
// transaction. Each call must queue exactly one op.
func whileHeld(t *testing.T, s *Store, calls ...func() error) []error {
	t.Helper()
	release := make(chan struct{})
	held := make(chan struct{})
	go s.w.do(context.Background(), func(*wtx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = call() })
		for {
			s.w.mu.Lock()
			n := len(s.w.queue)
			s.w.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	close(release)
	wg.Wait()
	return errs
}

// mergeCase is the mix of registrations the merge tests send in one
// transaction: what each answers must be what it answers alone.
type mergeCase struct {
	p        vigil.WatchCreateParams
	wantCode vigil.Code
	wantID   string // the watch answered ("" when refused)
	existing bool
	replayed bool
}

func mergeCases() []mergeCase {
	w := func(id, recipient, identity string) *vigil.Watch {
		x := timerWatch(id, recipient)
		if identity != "" {
			x.Identity = identity
		}
		return x
	}
	return []mergeCase{
		{p: vigil.WatchCreateParams{Watch: w("w1", "r", ""), MaxActivePerRecipient: 2}, wantID: "w1"},
		{p: vigil.WatchCreateParams{Watch: w("w2", "r", ""), MaxActivePerRecipient: 2}, wantID: "w2"},
		// r holds its cap of 2 by now.
		{p: vigil.WatchCreateParams{Watch: w("w3", "r", ""), MaxActivePerRecipient: 2}, wantCode: vigil.CodeQuotaExceeded},
		// The id is taken by the first.
		{p: vigil.WatchCreateParams{Watch: w("w1", "other", "")}, wantCode: vigil.CodeConflict},
		// The same watch as w4 by identity: w4 answers.
		{p: vigil.WatchCreateParams{Watch: w("w4", "other", "same")}, wantID: "w4"},
		{p: vigil.WatchCreateParams{Watch: w("w5", "other", "same")}, wantID: "w4", existing: true},
		// A key, then its replay, then the key for another request.
		{p: vigil.WatchCreateParams{Watch: w("w6", "k", ""), IdempotencyKey: "key", RequestHash: "h1"}, wantID: "w6"},
		{p: vigil.WatchCreateParams{Watch: w("w7", "k", ""), IdempotencyKey: "key", RequestHash: "h1"}, wantID: "w6", replayed: true},
		{p: vigil.WatchCreateParams{Watch: w("w8", "k", ""), IdempotencyKey: "key", RequestHash: "h2"}, wantCode: vigil.CodeIdempotencyConflict},
		// The total cap: 5 pending by now (w1, w2, w4, w6, and this one's
		// neighbour below is over it).
		{p: vigil.WatchCreateParams{Watch: w("w9", "t", ""), MaxActive: 5}, wantID: "w9"},
		{p: vigil.WatchCreateParams{Watch: w("w10", "t", ""), MaxActive: 5}, wantCode: vigil.CodeQuotaExceeded},
	}
}

// runMergeCases registers the cases in one transaction, with an op that
// is not a registration between them, and checks every answer and what
// is stored.
func runMergeCases(t *testing.T, s *Store) {
	t.Helper()
	cases := mergeCases()
	got := make([]*vigil.Watch, len(cases))
	var calls []func() error
	for i, c := range cases {
		calls = append(calls, func() error {
			var err error
			got[i], err = s.WatchCreate(context.Background(), c.p)
			return err
		})
	}
	// Not a registration: runs in its own savepoint beside them (last, so
	// that the caps count the same watches merged or not).
	calls = append(calls, func() error {
		return s.w.do(context.Background(), createOp(timerWatch("plain", "p"), 0))
	})
	errs := whileHeld(t, s, calls...)
	if errs[len(cases)] != nil {
		t.Errorf("the op beside the registrations failed: %v", errs[len(cases)])
	}
	for i, c := range cases {
		if code := vigil.ErrorCode(errs[i]); code != c.wantCode {
			t.Errorf("case %d (%s) error = %v, want code %q", i, c.p.Watch.ID, errs[i], c.wantCode)
			continue
		}
		if c.wantCode != "" {
			continue
		}
		if g := got[i]; g == nil || g.ID != c.wantID || g.Existing != c.existing || g.Replayed != c.replayed {
			t.Errorf("case %d (%s) = %+v, want id %s existing %v replayed %v", i, c.p.Watch.ID, g, c.wantID, c.existing, c.replayed)
		}
	}
	for _, id := range []string{"w1", "w2", "w4", "w6", "w9", "plain"} {
		if _, err := s.WatchGet(t.Context(), id); err != nil {
			t.Errorf("WatchGet(%s) error = %v", id, err)
		}
	}
	for _, id := range []string{"w3", "w5", "w7", "w8", "w10"} {
		if w, err := s.WatchGet(t.Context(), id); vigil.ErrorCode(err) != vigil.CodeNotFound {
			t.Errorf("WatchGet(%s) = %v, %v; want not_found", id, w, err)
		}
	}
	if w, err := s.WatchGet(t.Context(), "w1"); err != nil || w.Recipient != "r" {
		t.Errorf("w1 = %v, %v; want the first one, of r", w, err)
	}
	checkCounters(t, s)
}

// Registrations that wait for the same commit are written together, and
// each answers as it would alone.
func TestConcurrentCreatesMerge(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	var merges atomic.Int32
	f := func() error { merges.Add(1); return nil }
	s.w.mergeFault.Store(&f)
	runMergeCases(t, s)
	if n := merges.Load(); n != 1 {
		t.Errorf("the registrations were merged %d times, want once", n)
	}
}

// When the merged write fails as a whole, the registrations are written
// one by one, with the same answers.
func TestMergeFailureFallsBackToOneByOne(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	var merges atomic.Int32
	f := func() error { merges.Add(1); return vigil.Errorf(vigil.CodeInternal, "merge refused by the test") }
	s.w.mergeFault.Store(&f)
	runMergeCases(t, s)
	if n := merges.Load(); n != 1 {
		t.Errorf("the merge was tried %d times, want once", n)
	}
}

// A failed commit fails merged registrations too: none is answered as
// written, none is stored.
func TestMergedCreatesHearAFailedCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	create := func(id string) func() error {
		return func() error {
			_, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{Watch: timerWatch(id, "r")})
			return err
		}
	}
	errs := whileHeld(t, s, create("w1"), create("w2"), func() error {
		return s.w.do(context.Background(), func(t *wtx) error {
			// A foreign key checked only at COMMIT: the commit fails.
			if _, err := t.conn.ExecContext(context.Background(), "PRAGMA defer_foreign_keys = ON"); err != nil {
				return err
			}
			_, err := t.conn.ExecContext(context.Background(),
				"INSERT INTO idempotency (recipient, key, request_hash, watch_id, created_at) VALUES ('r', 'k', 'h', 'no-such-watch', 0)")
			return err
		})
	})
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit") {
			t.Errorf("op %d error = %v, want the commit's error", i, err)
		}
	}
	for _, id := range []string{"w1", "w2"} {
		if _, err := s.WatchGet(t.Context(), id); vigil.ErrorCode(err) != vigil.CodeNotFound {
			t.Errorf("WatchGet(%s) after a failed commit error = %v, want not_found", id, err)
		}
	}
	checkCounters(t, s)
}
