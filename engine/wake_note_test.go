package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// TestRegisterRefusesAWakeNoteWithNUL: the claude and codex adapters pass the
// watch's note inside {prompt}, one argument, and a value holding a NUL
// byte is refused when the wake runs (ResumeOptions.Program): the session
// is never resumed. Such a note must be refused at registration, naming
// the note, while the caller is there to fix it, not accepted with a wake
// that cannot run.
func TestRegisterRefusesAWakeNoteWithNUL(t *testing.T) {
	t.Parallel()
	e := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{})),
		DeliverPolicy: deliver.Policy{AllowExec: true}})
	if err := e.Prime(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := e.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1h"}`),
		Recipient: "agent-7", Note: "merge PR 41\x00 when green", Deliver: json.RawMessage(`{"resume":{"harness":"claude","session":"s1"}}`)})
	if err == nil {
		p := deliver.NewPayload(w, "01M")
		r := deliver.ResumeOptions{Harness: deliver.HarnessClaude, Session: "s1"}
		_, perr := r.Program(&p)
		t.Fatalf("registered %s with a wake; when it settles the wake runs nothing: %v", w.ID, perr)
	}
	if vigil.ErrorField(err) != "note" {
		t.Errorf("Register = %v; want a refusal naming the note", err)
	}
}
