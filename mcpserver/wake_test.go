package mcpserver_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// timerEngine runs, until the test ends, an engine with the timer watcher
// on a memory store, with exec allowed or not.
func timerEngine(t *testing.T, allowExec bool) *engine.Engine {
	t.Helper()
	e := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{})),
		DeliverPolicy: deliver.Policy{AllowExec: allowExec}})
	if err := e.Prime(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// TestCreateWake: watch_create's wake ("claude:ID", "codex:ID") registers
// a resume delivery run in the server's WakeDir; a bad harness or an empty
// session is refused naming the field, wake with deliver.resume is
// refused, and a daemon without exec refuses it.
func TestCreateWake(t *testing.T) {
	t.Parallel()
	e := timerEngine(t, true)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1", WakeDir: "/src/app"}), nil)
	for _, tt := range []struct {
		wake, in string
		want     deliver.ResumeOptions
	}{
		{"claude:3f9f74a6-6b7c", "1h", deliver.ResumeOptions{Harness: "claude", Session: "3f9f74a6-6b7c", Cwd: "/src/app", On: "any", Timeout: "10m"}},
		{"codex:019d1afb", "2h", deliver.ResumeOptions{Harness: "codex", Session: "019d1afb", Cwd: "/src/app", On: "any", Timeout: "10m"}},
	} {
		// A predicate of its own per case: the same one again would be
		// the same watch (identity), not a new registration.
		out := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": tt.in},
			"wake": tt.wake, "deliver": map[string]any{"progress": true}})
		w, err := e.Watch(t.Context(), out.Watch.ID)
		if err != nil {
			t.Fatal(err)
		}
		o, err := deliver.ParseOptions(w.Deliver)
		if err != nil || o.Resume == nil || !o.Progress {
			t.Fatalf("wake %s: deliver %s (%v), want the resume and progress", tt.wake, w.Deliver, err)
		}
		if got := *o.Resume; got.Harness != tt.want.Harness || got.Session != tt.want.Session || got.Cwd != tt.want.Cwd || got.On != tt.want.On || got.Timeout != tt.want.Timeout {
			t.Errorf("wake %s: resume %+v, want %+v", tt.wake, got, tt.want)
		}
	}
	for _, tt := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"wake": "gemini:s1"}, "deliver.resume.harness"},
		{map[string]any{"wake": "claude:"}, "deliver.resume.session"},
		{map[string]any{"wake": "claude"}, "wake"},
		{map[string]any{"wake": "claude:s1", "deliver": map[string]any{"resume": map[string]any{"harness": "codex", "session": "s2"}}}, "not both"},
	} {
		args := map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "recipient": "refused"}
		for k, v := range tt.args {
			args[k] = v
		}
		if msg := callErr(t, cs, "watch_create", args); !strings.Contains(msg, tt.want) {
			t.Errorf("watch_create %v = %q, want it to name %q", tt.args, msg, tt.want)
		}
	}
	page, err := e.Watches(t.Context(), vigil.ListRequest{Recipient: "refused"})
	if err != nil || len(page.Watches) != 0 {
		t.Errorf("refused calls registered %d watches (%v), want none", len(page.Watches), err)
	}
	noExec := connect(t, mcpserver.New(timerEngine(t, false), &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	if msg := callErr(t, noExec, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "wake": "claude:s1"}); !strings.Contains(msg, "--allow-exec") {
		t.Errorf("wake without exec = %q, want it to name --allow-exec", msg)
	}
}

// TestCreateWakeOnExisting: watch_create with wake for a condition already
// pending for the recipient returns that watch, which keeps its own
// delivery options (another session's wake is never replaced by this
// one's), and says so plainly, in asked_deliver and in the hint, with what
// to do: an agent that ended its session believing it would be resumed
// never was. Asking for the wake the watch already carries, or for none,
// says nothing of the kind.
func TestCreateWakeOnExisting(t *testing.T) {
	t.Parallel()
	e := timerEngine(t, true)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1", WakeDir: "/src/app"}), nil)
	// A timer well ahead, the same for both registrations of a case.
	base := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)

	for i, tt := range []struct {
		name  string
		first map[string]any // what the first registration adds to kind and predicate
		says  []string       // in the hint, besides that the wake was not registered
	}{
		{"no delivery", map[string]any{"note": "first session"},
			[]string{"none: the inbox only", "cancel this watch (watch_cancel ", "keep your session open"}},
		{"another session's wake", map[string]any{"wake": "claude:session-1"},
			[]string{`"session":"session-1"`, "It resumes another session (claude session session-1)", "do not cancel it", "a recipient of your own"}},
	} {
		pred := map[string]any{"at": base.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)}
		first := callOK[watchResult](t, cs, "watch_create", merge(map[string]any{"kind": "timer", "predicate": pred}, tt.first))
		second := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": pred, "wake": "claude:session-2"})
		if !second.Watch.Existing || second.Watch.ID != first.Watch.ID {
			t.Fatalf("%s: second registration = %+v, want the existing watch", tt.name, second.Watch)
		}
		if !strings.Contains(string(second.Watch.AskedDeliver), `"session":"session-2"`) {
			t.Errorf("%s: asked_deliver = %s, want the wake asked for", tt.name, second.Watch.AskedDeliver)
		}
		for _, want := range append([]string{"YOUR WAKE WAS NOT REGISTERED", "your claude session session-2"}, tt.says...) {
			if !strings.Contains(second.Hint, want) {
				t.Errorf("%s: hint does not say %q:\n%s", tt.name, want, second.Hint)
			}
		}
		w, err := e.Watch(t.Context(), first.Watch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := deliver.ParseOptions(w.Deliver); o.Resume != nil && o.Resume.Session == "session-2" {
			t.Errorf("%s: the pending watch's options became %s: the existing watch's were replaced", tt.name, w.Deliver)
		}

		// Asking again for what it carries, or for nothing: no warning.
		again := []map[string]any{{"kind": "timer", "predicate": pred}}
		if wake, ok := tt.first["wake"]; ok {
			again = append(again, map[string]any{"kind": "timer", "predicate": pred, "wake": wake})
		}
		for _, args := range again {
			out := callOK[watchResult](t, cs, "watch_create", args)
			if !out.Watch.Existing || len(out.Watch.AskedDeliver) > 0 || strings.Contains(out.Hint, "NOT") {
				t.Errorf("%s: watch_create %v = asked_deliver %s, hint %q; want the existing watch and no warning", tt.name, args, out.Watch.AskedDeliver, out.Hint)
			}
		}
	}
}

// merge returns a with b's entries added.
func merge(a, b map[string]any) map[string]any {
	maps.Copy(a, b)
	return a
}

// TestCreateManyWake: an item of watch_create_many takes wake as
// watch_create does (docs/agents.md: "items as watch_create takes them,
// without observe"), registering the resume in the server's WakeDir; a
// malformed wake refuses its item only, not the batch.
func TestCreateManyWake(t *testing.T) {
	t.Parallel()
	e := timerEngine(t, true)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1", WakeDir: "/src/app"}), nil)
	got := callOK[createManyResult](t, cs, "watch_create_many", map[string]any{"watches": []any{
		map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}, "wake": "claude:3f9f74a6-6b7c"},
		map[string]any{"kind": "timer", "predicate": map[string]any{"in": "2h"}, "wake": "claude"},
		map[string]any{"kind": "timer", "predicate": map[string]any{"in": "3h"}},
	}})
	if len(got.Results) != 3 || got.Results[0].Status != "created" || got.Results[1].Status != "refused" || got.Results[2].Status != "created" {
		t.Fatalf("watch_create_many = %+v, want created, refused (the malformed wake), created", got.Results)
	}
	if !strings.Contains(got.Results[1].Error, "wake") {
		t.Errorf("refused item's error = %q, want it to name wake", got.Results[1].Error)
	}
	w, err := e.Watch(t.Context(), got.Results[0].Watch.ID)
	if err != nil {
		t.Fatal(err)
	}
	o, err := deliver.ParseOptions(w.Deliver)
	if err != nil || o.Resume == nil || o.Resume.Harness != "claude" || o.Resume.Session != "3f9f74a6-6b7c" || o.Resume.Cwd != "/src/app" {
		t.Fatalf("deliver %s (%v), want a claude resume of 3f9f74a6-6b7c in /src/app", w.Deliver, err)
	}
	// A wake for a condition already pending is not registered, and the
	// hint says so.
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	callOK[createManyResult](t, cs, "watch_create_many", map[string]any{"watches": []any{
		map[string]any{"kind": "timer", "predicate": map[string]any{"at": at}},
	}})
	again := callOK[createManyResult](t, cs, "watch_create_many", map[string]any{"watches": []any{
		map[string]any{"kind": "timer", "predicate": map[string]any{"at": at}, "wake": "codex:019d1afb"},
	}})
	if again.Existing != 1 || !strings.Contains(again.Hint, "NOT registered") {
		t.Errorf("wake on an existing watch: %+v, want existing and a hint that the wake was NOT registered", again)
	}
}
