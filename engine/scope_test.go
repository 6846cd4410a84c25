package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/token"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestRevokeWhilePending: a token revoked while its watches are pending
// cancels them before their next probe (timers too), silently, and the
// probe never runs.
func TestRevokeWhilePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: t0}
	st := memstore.New()
	tokens := auth.New(auth.Config{Store: st, NowFunc: c.Now})
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	e := engine.New(engine.Config{
		Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{}), fake), NowFunc: c.Now,
		CheckFunc: tokens.CheckWatch,
	})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, tok := scopedToken(t, tokens)
	hw, err := e.Register(sctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`), Every: "10s"})
	if err != nil {
		t.Fatal(err)
	}
	tw, err := e.Register(sctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: obj(`{"in":"1m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := st.WatchGet(ctx, hw.ID)
	if stored.TokenID != tok.ID {
		t.Fatalf("stored TokenID = %q, want %q", stored.TokenID, tok.ID)
	}
	e.Tick(ctx, t0) // the first probe, at once
	before := fake.Probes(hw.ID)
	if before != 1 {
		t.Fatalf("probes before revocation = %d, want 1", before)
	}
	if _, err := tokens.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	now := c.t.Add(2 * time.Minute)
	c.t = now
	e.Tick(ctx, now)
	if got := fake.Probes(hw.ID); got != before {
		t.Errorf("probes after revocation = %d, want %d: the probe must not run", got, before)
	}
	for _, id := range []string{hw.ID, tw.ID} {
		got, err := e.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != vigil.StateCancelled || got.Outcome == nil || got.Outcome.Reason != auth.ReasonRevoked {
			t.Errorf("watch %s: %s %+v, want cancelled, reason revoked", id, got.State, got.Outcome)
		}
	}
	p, err := e.Messages(ctx, vigil.MessagesRequest{Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 0 {
		t.Errorf("mailbox %+v: revocation must deliver nothing", p.Messages)
	}
}

// TestScopeKindsAndExec: a scoped token registers only its kinds, and
// kinds that run commands only with the exec scope; the refusal is
// forbidden (a permission, not something hidden) with a sentence naming
// what is missing. Another recipient stays not_found.
func TestScopeKindsAndExec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cmd := watchertest.NeverSettles(vigil.KindCommand)
	e := engine.New(engine.Config{Store: memstore.New(), NowFunc: (&clock{t: t0}).Now,
		Watchers: watcher.NewRegistry(timer.New(timer.Config{}), watchertest.NeverSettles(vigil.KindHTTP), cmd)})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	reg := func(s vigil.Scope, k vigil.Kind, recipient string) error {
		_, err := e.Register(vigil.WithScope(ctx, s), vigil.RegisterRequest{Kind: k, Recipient: recipient, Predicate: obj(`{"in":"1m"}`)})
		return err
	}
	noExec := vigil.Scope{Recipients: []string{"a"}, TokenID: "t1"}
	if err := reg(noExec, vigil.KindCommand, "a"); vigil.ErrorCode(err) != vigil.CodeForbidden || vigil.ErrorMessage(err) == "" {
		t.Errorf("command without exec scope = %v, want forbidden naming the exec scope", err)
	} else if want := "exec scope"; !strings.Contains(vigil.ErrorMessage(err), want) {
		t.Errorf("message %q does not name %q", vigil.ErrorMessage(err), want)
	}
	if err := reg(vigil.Scope{Recipients: []string{"a"}, Exec: true, TokenID: "t2"}, vigil.KindCommand, "a"); err != nil {
		t.Errorf("command with exec scope = %v, want it allowed", err)
	}
	timersOnly := vigil.Scope{Recipients: []string{"a"}, Kinds: []vigil.Kind{vigil.KindTimer}, TokenID: "t3"}
	if err := reg(timersOnly, vigil.KindHTTP, "a"); vigil.ErrorCode(err) != vigil.CodeForbidden || !strings.Contains(vigil.ErrorMessage(err), "timer") {
		t.Errorf("http with a timer-only token = %v, want forbidden naming its kinds", err)
	}
	if err := reg(timersOnly, vigil.KindTimer, "a"); err != nil {
		t.Errorf("timer with a timer-only token = %v", err)
	}
	if err := reg(timersOnly, vigil.KindTimer, "b"); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("another recipient = %v, want not_found", err)
	}
}

// TestRevokedTokenWatchIsNotCompleted: a token watch whose scoped token was
// revoked is not settled by its completion URL, which would deliver its
// outcome (mailbox, webhook, command) as if the token still held: it is
// cancelled then, silently, reason revoked, as a probe would cancel it, and
// the completion is told the watch has ended.
func TestRevokedTokenWatchIsNotCompleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: t0}
	st := memstore.New()
	tokens := auth.New(auth.Config{Store: st, NowFunc: c.Now})
	e := engine.New(engine.Config{
		Store: st, Watchers: watcher.NewRegistry(token.New(token.Config{})), NowFunc: c.Now,
		CheckFunc: tokens.CheckWatch,
	})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"r"}})
	if err != nil {
		t.Fatal(err)
	}
	scope, _, _ := tokens.Authenticate(ctx, tok.Secret)
	w, err := e.Register(vigil.WithScope(ctx, scope), vigil.RegisterRequest{Kind: vigil.KindToken, Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	c.t = t0.Add(time.Minute)
	got, err := e.Complete(ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: vigil.CompleteSuccess})
	if vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Errorf("Complete of a revoked token's watch = %+v, %v; want conflict, the watch ended", got, err)
	}
	after, err := e.Watch(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != vigil.StateCancelled || after.Outcome == nil || after.Outcome.Reason != auth.ReasonRevoked {
		t.Errorf("watch after the completion: %s %+v, want cancelled, reason revoked", after.State, after.Outcome)
	}
	p, err := e.Messages(ctx, vigil.MessagesRequest{Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 0 {
		t.Errorf("mailbox %+v: a revoked token's watch delivers nothing", p.Messages)
	}
}

// TestRevokedWatchPastDeadlineAtStart: a watch whose token was revoked,
// and whose deadline passed while the daemon was down, is cancelled
// silently (reason revoked) when the next start finds it, as its final
// probe would have been: not expired, mailed and pushed (a webhook, an
// on-fail command) as if the token still held.
func TestRevokedWatchPastDeadlineAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: t0}
	st := memstore.New()
	tokens := auth.New(auth.Config{Store: st, NowFunc: c.Now})
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	reg := watcher.NewRegistry(timer.New(timer.Config{}), fake)
	e := engine.New(engine.Config{Store: st, Watchers: reg, NowFunc: c.Now, CheckFunc: tokens.CheckWatch})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, tok := scopedToken(t, tokens)
	revoked, err := e.Register(sctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`), Every: "10s", Deadline: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	admins, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{"admin":true}`), Every: "10s", Deadline: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	e.Tick(ctx, t0) // the first probes; then the token is revoked and the daemon stops
	if _, err := tokens.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}

	// The next start, past the deadline.
	c.t = t0.Add(time.Hour)
	var delivered []string
	e2 := engine.New(engine.Config{Store: st, Watchers: reg, NowFunc: c.Now, CheckFunc: tokens.CheckWatch,
		DeliverFunc: func(w *vigil.Watch, _ *vigil.Message) { delivered = append(delivered, w.ID) }})
	if err := e2.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e2.Watch(ctx, revoked.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateCancelled || got.Outcome == nil || got.Outcome.Reason != auth.ReasonRevoked {
		t.Errorf("the revoked token's watch: %s %+v, want cancelled, reason revoked", got.State, got.Outcome)
	}
	if got, _ := e2.Watch(ctx, admins.ID); got.State != vigil.StateExpired {
		t.Errorf("the admin's watch: %s, want expired (down past its deadline)", got.State)
	}
	if len(delivered) != 1 || delivered[0] != admins.ID {
		t.Errorf("delivered %v; want only the admin's watch, nothing for the revoked token's", delivered)
	}
	p, err := e2.Messages(ctx, vigil.MessagesRequest{Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Messages {
		if m.WatchID == revoked.ID {
			t.Errorf("mailbox holds %+v for the revoked token's watch; revocation delivers nothing", m)
		}
	}
}

// TestJoinOfARevokedTokensWatch: a registration of a live token that
// matches a pending watch of a revoked token (the same timer, asked again
// after a rotation of tokens) gets a watch of its own, which fires and
// mails its outcome: the revoked token's watch is cancelled silently, as
// its turn would have, and neither a single registration, a keyed one
// (whose retry replays the new watch) nor a batch's item is left joined
// to it. They were answered "existing" with the dead watch, and at its
// turn it was cancelled silently: the caller never heard.
func TestJoinOfARevokedTokensWatch(t *testing.T) {
	for name, mk := range batchStores(t) {
		t.Run(name, func(t *testing.T) { testJoinOfARevokedTokensWatch(t, mk(t)) })
	}
}

func testJoinOfARevokedTokensWatch(t *testing.T, st vigil.Store) {
	ctx, rj := context.Background(), newRevokedJoin(t, st, nil)
	e, c, at, dead, live := rj.e, rj.c, rj.at, rj.dead, rj.live
	single := rj.register(t, 1, "")
	keyed := rj.register(t, 2, "k2")
	batch, err := e.RegisterBatch(live, []vigil.RegisterRequest{{Kind: vigil.KindTimer, Recipient: "r", Predicate: at(3)}})
	if err != nil || batch[0].Err != nil {
		t.Fatalf("batch = %+v, %v", batch, err)
	}
	mine := []*vigil.Watch{single, keyed, batch[0].Watch}
	for i, w := range mine {
		if w.ID == dead[i] || w.Existing {
			t.Errorf("registration %d joined %s, the revoked token's watch (existing %v); want a watch of its own", i+1, dead[i], w.Existing)
		}
	}
	again, err := e.Register(live, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: at(2), IdempotencyKey: "k2"})
	if err != nil || again.ID != keyed.ID || !again.Replayed {
		t.Errorf("the keyed registration's retry = %+v, %v; want a replay of %s", again, err, keyed.ID)
	}
	for _, id := range dead {
		if w, err := st.WatchGet(ctx, id); err == nil && w.State != vigil.StateCancelled {
			t.Errorf("the revoked token's watch %s is %s, want cancelled (or gone)", id, w.State)
		}
	}
	c.t = t0.Add(5 * time.Minute)
	e.Tick(ctx, c.t)
	for _, w := range mine {
		got, err := e.Watch(live, w.ID)
		if err != nil || got.State != vigil.StateFired {
			t.Errorf("watch %s = %+v, %v; want fired", w.ID, got, err)
		}
	}
	p, err := e.Messages(live, vigil.MessagesRequest{Recipient: "r"})
	if err != nil || len(p.Messages) != 3 {
		t.Errorf("mailbox = %d messages, %v; want the three outcomes", len(p.Messages), err)
	}
}

// TestJoinOfARevokedTokensWatchSettledMeanwhile: a registration that
// finds the pending watch it matched belongs to a dead token, but loses
// the cancel of it (another registration that matched it, or its turn,
// settled it first), is not left joined to the dead watch either: it
// registers again and gets a live watch, which fires. One that lost to
// the watch firing (before its token died) stays joined to it, as a join
// of any pending watch that then settles does. Before, every lost cancel
// answered the dead watch as a pending join, and the caller never heard.
func TestJoinOfARevokedTokensWatchSettledMeanwhile(t *testing.T) {
	for name, mk := range batchStores(t) {
		t.Run(name, func(t *testing.T) { testJoinOfARevokedTokensWatchSettledMeanwhile(t, mk(t)) })
	}
}

func testJoinOfARevokedTokensWatchSettledMeanwhile(t *testing.T, st vigil.Store) {
	// meanwhile settles the watch a check is about to find dead, as a
	// racing registration or turn would, once per watch.
	meanwhile := map[string]func(id string){}
	rj := newRevokedJoin(t, st, func(tokens *auth.Service) func(context.Context, *vigil.Watch) error {
		return func(ctx context.Context, w *vigil.Watch) error {
			err := tokens.CheckWatch(ctx, w)
			if f := meanwhile[w.ID]; f != nil && err != nil {
				delete(meanwhile, w.ID)
				f(w.ID)
			}
			return err
		}
	})
	ctx, e, c, at, dead := context.Background(), rj.e, rj.c, rj.at, rj.dead
	settle := func(id string, state vigil.State, reason string) {
		out := &vigil.Outcome{State: state, Reason: reason, Sentence: "settled meanwhile"}
		var err error
		if state == vigil.StateCancelled {
			_, _, err = st.WatchCancel(ctx, vigil.WatchCancelParams{ID: id, Outcome: out, SettledAt: c.Now()})
		} else {
			_, err = st.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: id, State: state, Outcome: out, SettledAt: c.Now()}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The first: cancelled for the same reason meanwhile. The second
	// (keyed): cancelled and deleted, as a keyed registration that won
	// does. The third: fired meanwhile.
	meanwhile[dead[0]] = func(id string) { settle(id, vigil.StateCancelled, auth.ReasonRevoked) }
	meanwhile[dead[1]] = func(id string) {
		settle(id, vigil.StateCancelled, auth.ReasonRevoked)
		if err := st.WatchDelete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	meanwhile[dead[2]] = func(id string) { settle(id, vigil.StateFired, "satisfied") }
	live := rj.live
	single := rj.register(t, 1, "")
	keyed := rj.register(t, 2, "k2")
	fired := rj.register(t, 3, "")
	if len(meanwhile) != 0 {
		t.Fatalf("%d registrations did not check the dead watch they matched", len(meanwhile))
	}
	for i, w := range []*vigil.Watch{single, keyed} {
		if w.ID == dead[i] || w.Existing {
			t.Errorf("registration %d joined %s, the revoked token's watch settled meanwhile (existing %v); want a watch of its own", i+1, dead[i], w.Existing)
		}
	}
	if fired.ID != dead[2] {
		t.Errorf("the registration that matched a watch which fired meanwhile got %s, want joined to %s", fired.ID, dead[2])
	}
	again, err := e.Register(live, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: at(2), IdempotencyKey: "k2"})
	if err != nil || again.ID != keyed.ID || !again.Replayed {
		t.Errorf("the keyed registration's retry = %+v, %v; want a replay of %s", again, err, keyed.ID)
	}
	c.t = t0.Add(5 * time.Minute)
	e.Tick(ctx, c.t)
	for _, w := range []*vigil.Watch{single, keyed} {
		got, err := e.Watch(live, w.ID)
		if err != nil || got.State != vigil.StateFired {
			t.Errorf("watch %s = %+v, %v; want fired", w.ID, got, err)
		}
	}
}

// revokedJoin is a revoked token's three pending timers (due in 1, 2 and
// 3 minutes), and a live token of the same recipient to register again.
type revokedJoin struct {
	e    *engine.Engine
	c    *clock
	at   func(n int) json.RawMessage
	dead []string
	live context.Context
}

// register registers, as the live token, the timer due in n minutes
// (with idempotency key key, if not empty).
func (rj *revokedJoin) register(t *testing.T, n int, key string) *vigil.Watch {
	t.Helper()
	w, err := rj.e.Register(rj.live, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: rj.at(n), IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// newRevokedJoin makes a revokedJoin on st, whose engine's CheckFunc is
// check(tokens) (the tokens' own CheckWatch when check is nil).
func newRevokedJoin(t *testing.T, st vigil.Store, check func(tokens *auth.Service) func(context.Context, *vigil.Watch) error) *revokedJoin {
	t.Helper()
	ctx := context.Background()
	rj := &revokedJoin{c: &clock{t: t0}}
	tokens := auth.New(auth.Config{Store: st, NowFunc: rj.c.Now})
	cf := tokens.CheckWatch
	if check != nil {
		cf = check(tokens)
	}
	rj.e = engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), NowFunc: rj.c.Now, CheckFunc: cf})
	if err := rj.e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	rj.at = func(n int) json.RawMessage {
		return obj(`{"at":"` + t0.Add(time.Duration(n)*time.Minute).UTC().Format(time.RFC3339) + `"}`)
	}
	old, oldTok := scopedToken(t, tokens)
	for n := 1; n <= 3; n++ {
		w, err := rj.e.Register(old, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: rj.at(n)})
		if err != nil {
			t.Fatal(err)
		}
		rj.dead = append(rj.dead, w.ID)
	}
	if _, err := tokens.RevokeToken(ctx, oldTok.ID); err != nil {
		t.Fatal(err)
	}
	rj.live, _ = scopedToken(t, tokens)
	return rj
}

// scopedToken makes a token for recipient "r" (and the repositories
// repos, if any): a context with its scope, and the token.
func scopedToken(t *testing.T, tokens *auth.Service, repos ...string) (context.Context, *vigil.Token) {
	t.Helper()
	ctx := context.Background()
	tok, err := tokens.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"r"}, Repos: repos})
	if err != nil {
		t.Fatal(err)
	}
	scope, ok, err := tokens.Authenticate(ctx, tok.Secret)
	if err != nil || !ok {
		t.Fatalf("Authenticate = %v, %v", ok, err)
	}
	return vigil.WithScope(ctx, scope), tok
}
