package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func deliverEngine(t *testing.T, p deliver.Policy, fn func(*vigil.Watch, *vigil.Message)) (*engine.Engine, *countingStore, *clock) {
	t.Helper()
	c := &clock{t: t0}
	cs := &countingStore{Store: memstore.New()}
	e := engine.New(engine.Config{Store: cs, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), NowFunc: c.Now,
		DeliverPolicy: p, DeliverFunc: fn})
	if err := e.Prime(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, cs, c
}

// TestDeliverRefusedAtRegistration: bad delivery options are refused with
// their code, and nothing is written.
func TestDeliverRefusedAtRegistration(t *testing.T) {
	t.Parallel()
	e, cs, _ := deliverEngine(t, deliver.Policy{}, nil)
	argv := make([]string, 300)
	for i := range argv {
		argv[i] = "x"
	}
	longArgv, _ := json.Marshal(map[string]any{"command": map[string]any{"argv": argv}})
	for _, tt := range []struct {
		in   string
		code vigil.Code
	}{
		{`{"webhook":{"url":"ftp://hooks.example/x"}}`, vigil.CodeInvalidRequest},
		{`{"webhook":{"url":"javascript:alert(1)"}}`, vigil.CodeInvalidRequest},
		{`{"webhook":{"url":"https://hooks.example/x","secret":"sekrit"}}`, vigil.CodeInvalidRequest},
		{string(longArgv), vigil.CodeInvalidRequest},
		{`{"command":{"argv":["notify-send","done"]}}`, vigil.CodeWatchUnobservable},
		{`{"email":{"to":"ops@example.com"}}`, vigil.CodeWatchUnobservable},
		{`{"pager":true}`, vigil.CodeInvalidRequest},
	} {
		_, err := e.Register(context.Background(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a",
			Predicate: obj(`{"in":"1m"}`), Deliver: json.RawMessage(tt.in)})
		if vigil.ErrorCode(err) != tt.code || !strings.HasPrefix(vigil.ErrorField(err), "deliver") {
			t.Errorf("Register(deliver %s) = %v (field %q), want %s on a deliver field", tt.in, err, vigil.ErrorField(err), tt.code)
		}
		if strings.Contains(vigil.ErrorMessage(err), "sekrit") {
			t.Errorf("refusal %q quotes the secret", err)
		}
	}
	if n := cs.writes.Load(); n != 0 {
		t.Errorf("%d writes after refusals, want none", n)
	}
}

// TestDeliverStoredRedactedShown: the canonical options are stored with
// the secret (the dispatcher signs with it) and every answer redacts it.
func TestDeliverStoredRedactedShown(t *testing.T) {
	t.Parallel()
	var handed *vigil.Watch
	e, cs, c := deliverEngine(t, deliver.Policy{}, func(w *vigil.Watch, _ *vigil.Message) { handed = w })
	ctx := context.Background()
	w, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(`{"in":"1m"}`),
		Deliver: json.RawMessage(`{"progress":true,"webhook":{"secret":"` + hookSecret + `","url":"HTTPS://hooks.example/in"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := cs.Store.WatchGet(ctx, w.ID)
	if want := `{"progress":true,"webhook":{"secret":"` + hookSecret + `","url":"https://hooks.example/in"}}`; string(stored.Deliver) != want {
		t.Errorf("stored deliver = %s, want %s", stored.Deliver, want)
	}
	got, _ := e.Watch(ctx, w.ID)
	page, _ := e.Watches(ctx, vigil.ListRequest{})
	for what, x := range map[string]*vigil.Watch{"Register": w, "Watch": got, "Watches": page.Watches[0]} {
		b, _ := json.Marshal(x)
		if strings.Contains(string(b), strings.TrimPrefix(hookSecret, "whsec_")) || !strings.Contains(string(b), deliver.Redacted) {
			t.Errorf("%s answer = %s, want the secret redacted", what, b)
		}
	}
	c.Add(2 * 60e9)
	e.Tick(ctx, c.Now())
	if handed == nil || !strings.Contains(string(handed.Deliver), hookSecret) {
		t.Errorf("DeliverFunc got %+v, want the stored options with the secret", handed)
	}
}

// TestDedupHitSaysDeliverNotRegistered: registering what is already
// pending returns that watch, and it keeps its own delivery options: one
// session's resume is never replaced by another's. When the registration
// asked for options the pending watch does not carry as asked (a resume of
// another session, a webhook, progress), its answer carries them, secrets
// redacted (AskedDeliver), so every surface can say they were not
// registered; one that asked for none, or for what the watch carries,
// carries none. A batch says the same of each item.
func TestDedupHitSaysDeliverNotRegistered(t *testing.T) {
	t.Parallel()
	e, cs, _ := deliverEngine(t, deliver.Policy{AllowExec: true}, nil)
	ctx := context.Background()
	req := func(d string) vigil.RegisterRequest {
		r := vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(`{"in":"1h"}`)}
		if d != "" {
			r.Deliver = json.RawMessage(d)
		}
		return r
	}
	reg := func(d string) *vigil.Watch {
		t.Helper()
		w, err := e.Register(ctx, req(d))
		if err != nil {
			t.Fatalf("Register(deliver %s): %v", d, err)
		}
		return w
	}
	const mine = `{"resume":{"harness":"claude","session":"session-1","cwd":"/src/app"}}`
	first := reg(mine)
	for _, tt := range []struct{ deliver, asked string }{
		{`{"resume":{"harness":"claude","session":"session-2","cwd":"/src/app"}}`, `"session":"session-2"`},
		{`{"resume":{"harness":"claude","session":"session-1","cwd":"/src/app"},"progress":true}`, `"progress":true`},
		{`{"webhook":{"url":"https://hooks.example/in","secret":"` + hookSecret + `"}}`, deliver.Redacted},
	} {
		w := reg(tt.deliver)
		if !w.Existing || w.ID != first.ID || !strings.Contains(string(w.AskedDeliver), tt.asked) {
			t.Errorf("dedup hit asking for %s: existing %v, asked_deliver %s; want the first watch and what was asked for", tt.deliver, w.Existing, w.AskedDeliver)
		}
		if strings.Contains(string(w.AskedDeliver), strings.TrimPrefix(hookSecret, "whsec_")) {
			t.Errorf("asked_deliver %s shows the secret", w.AskedDeliver)
		}
	}
	for _, d := range []string{"", mine, `{"resume":{"cwd":"/src/app","session":"session-1","harness":"claude","on":"any"}}`} {
		if w := reg(d); !w.Existing || w.AskedDeliver != nil {
			t.Errorf("dedup hit asking for %q: existing %v, asked_deliver %s; want none", d, w.Existing, w.AskedDeliver)
		}
	}
	stored, _ := cs.Store.WatchGet(ctx, first.ID)
	if o, err := deliver.ParseOptions(stored.Deliver); err != nil || o.Resume == nil || o.Resume.Session != "session-1" || o.Webhook != nil || o.Progress {
		t.Errorf("the pending watch's options became %s, want its own resume of session-1 only", stored.Deliver)
	}

	res, err := e.RegisterBatch(ctx, []vigil.RegisterRequest{req(`{"resume":{"harness":"codex","session":"thread-9"}}`), req(mine)})
	if err != nil || len(res) != 2 {
		t.Fatalf("RegisterBatch = %v, %v", res, err)
	}
	if w := res[0].Watch; w == nil || !w.Existing || !strings.Contains(string(w.AskedDeliver), `"session":"thread-9"`) {
		t.Errorf("batch item asking for another resume = %+v, want existing with asked_deliver", res[0])
	}
	if w := res[1].Watch; w == nil || !w.Existing || w.AskedDeliver != nil {
		t.Errorf("batch item asking for the watch's own resume = %+v, want existing without asked_deliver", res[1])
	}
}

// TestDedupHitReplaySaysDeliverNotRegistered: a retry of a registration
// that matched a pending watch (the same idempotency key and request),
// single or in a batch, says again that the delivery options it asked for
// were not registered: the retry is that of a caller that lost the first
// answer, and without asked_deliver it would end its session believing
// its own wake registered.
func TestDedupHitReplaySaysDeliverNotRegistered(t *testing.T) {
	t.Parallel()
	e, _, _ := deliverEngine(t, deliver.Policy{AllowExec: true}, nil)
	ctx := context.Background()
	req := func(d, key string) vigil.RegisterRequest {
		r := vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(`{"in":"1h"}`), IdempotencyKey: key}
		if d != "" {
			r.Deliver = json.RawMessage(d)
		}
		return r
	}
	first, err := e.Register(ctx, req(`{"resume":{"harness":"claude","session":"session-1"}}`, ""))
	if err != nil {
		t.Fatal(err)
	}
	other := req(`{"resume":{"harness":"claude","session":"session-2"}}`, "k2")
	for i := range 2 {
		w, err := e.Register(ctx, other)
		if err != nil || !w.Existing || w.ID != first.ID || w.Replayed != (i == 1) || !strings.Contains(string(w.AskedDeliver), `"session":"session-2"`) {
			t.Errorf("registration %d of session-2's wake = %+v, %v; want existing %s (replayed the second time) with asked_deliver", i+1, w, err, first.ID)
		}
	}
	batched := req(`{"resume":{"harness":"codex","session":"thread-9"}}`, "k9")
	for i := range 2 {
		res, err := e.RegisterBatch(ctx, []vigil.RegisterRequest{batched})
		if err != nil || len(res) != 1 {
			t.Fatalf("RegisterBatch = %v, %v", res, err)
		}
		if w := res[0].Watch; w == nil || !w.Existing || w.Replayed != (i == 1) || !strings.Contains(string(w.AskedDeliver), `"session":"thread-9"`) {
			t.Errorf("batch %d asking for thread-9's wake = %+v; want existing (replayed the second time) with asked_deliver", i+1, res[0])
		}
	}
	// A replay of the registration that made its watch asks for nothing
	// it lacks.
	made := req(`{"resume":{"harness":"claude","session":"session-3"}}`, "k3")
	made.Predicate = obj(`{"in":"2h"}`)
	for range 2 {
		if w, err := e.Register(ctx, made); err != nil || w.AskedDeliver != nil {
			t.Errorf("registration that made its watch = %+v, %v; want no asked_deliver", w, err)
		}
	}
}
