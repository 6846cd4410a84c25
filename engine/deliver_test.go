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
