package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil/store/postgres"
)

// syncBuffer is a bytes.Buffer safe for the store's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// withApp returns u with its connections named app.
func withApp(t *testing.T, u, app string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("application_name", app)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// A resume turn is held by one store at a time among those on the same
// schema: another waits (and says so), takes it when it is given up or
// when its holder's connection ends (Close, or a dead replica), and
// gives up waiting when its context ends. Other keys do not wait.
func TestTurnOneHolderAcrossStores(t *testing.T) {
	t.Parallel()
	u := newSchema(t)
	a, b := open(t, u), open(t, u)
	defer a.Close()
	defer b.Close()
	ctx := t.Context()

	relA, err := a.Turn(ctx, "claude\x00sess-1", func() { t.Error("the first turn of a key waited") })
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	got := make(chan func(), 1)
	go func() {
		rel, err := b.Turn(ctx, "claude\x00sess-1", func() { waiting <- struct{}{} })
		if err != nil {
			t.Error(err)
			return
		}
		got <- rel
	}()
	<-waiting
	select {
	case <-got:
		t.Fatal("a second store took a turn held by the first")
	default:
	}
	// Another key is not held up.
	relOther, err := b.Turn(ctx, "claude\x00sess-2", func() { t.Error("a turn of another session waited") })
	if err != nil {
		t.Fatal(err)
	}
	relOther()

	// Given up: the waiter takes it.
	relA()
	relB := <-got

	// Now a waits, and gives up when its context ends.
	cctx, cancel := context.WithCancel(ctx)
	aWaits := make(chan struct{}, 1)
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Turn(cctx, "claude\x00sess-1", func() { aWaits <- struct{}{} })
		aDone <- err
	}()
	<-aWaits
	cancel()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Turn whose context ended = %v, want context.Canceled", err)
	}

	// b's holder dies (its store closes): a takes the turn.
	go func() {
		rel, err := a.Turn(ctx, "claude\x00sess-1", nil)
		if err != nil {
			t.Error(err)
			return
		}
		got <- rel
	}()
	b.Close()
	relB() // after its store closed: harmless
	(<-got)()
	if _, err := b.Turn(ctx, "claude\x00sess-3", nil); err == nil {
		t.Error("Turn on a closed store took a turn")
	}
	a.Close()
}

// A store whose turns connection is cut while it holds a turn gives the
// turn up (the server ends its locks), connects again at its next use,
// takes again the turns still running that nobody took, and logs those
// another store took meanwhile.
func TestTurnConnectionCut(t *testing.T) {
	t.Parallel()
	u := newSchema(t)
	var logs syncBuffer
	a := openWith(t, withApp(t, u, "vigil_turn_cut_a"), &postgres.Options{MaxConns: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer a.Close()
	b := open(t, u)
	defer b.Close()
	ctx := t.Context()

	rel1, err := a.Turn(ctx, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	rel2, err := a.Turn(ctx, "k2", nil)
	if err != nil {
		t.Fatal(err)
	}
	admin(t, u, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'vigil_turn_cut_a resume turns'`)
	// b takes k1 while a is cut off.
	relB, err := b.Turn(ctx, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// a's next use connects again: it holds k2 again, and says it lost k1.
	rel3, err := a.Turn(ctx, "k3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "another daemon took some of them") {
		t.Errorf("log = %q, want the lost turn said", logs.String())
	}
	waiting := make(chan struct{}, 1)
	got := make(chan func(), 1)
	go func() {
		rel, err := b.Turn(ctx, "k2", func() { waiting <- struct{}{} })
		if err != nil {
			t.Error(err)
			return
		}
		got <- rel
	}()
	<-waiting
	rel2()
	(<-got)()
	rel1() // lost: giving it up does not give up b's
	rel3()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan struct{})
	go func() {
		<-waited
		cancel()
	}()
	if _, err := a.Turn(cctx, "k1", func() { close(waited) }); !errors.Is(err, context.Canceled) {
		t.Errorf("a's Turn of k1, held by b: %v, want to wait until its context ended", err)
	}
	relB()
}
