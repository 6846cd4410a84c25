package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/mcpserver"
)

func TestNoteWrite(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	out := callOK[struct {
		Message mcpserver.Message `json:"message"`
	}](t, cs, "note_write", map[string]any{"recipient": "agent-2", "title": "nightly findings", "body": "2 flaky tests"})
	if out.Message.Type != vigil.MessageNote || out.Message.Text != "nightly findings" || out.Message.Seq == 0 {
		t.Fatalf("note_write = %+v", out.Message)
	}
	// The other agent reads it once, like an outcome.
	got := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"recipient": "agent-2"})
	if len(got.Messages) != 1 || got.Messages[0].Seq != out.Message.Seq || !strings.Contains(string(got.Messages[0].Data), "2 flaky tests") {
		t.Fatalf("agent-2's inbox = %+v", got.Messages)
	}
	// The connection's own inbox is the default.
	callOK[struct{}](t, cs, "note_write", map[string]any{"title": "to myself"})
	if mine := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(mine.Messages) != 1 || mine.Messages[0].Text != "to myself" {
		t.Fatalf("agent-1's inbox = %+v", mine.Messages)
	}
	for args, want := range map[string]map[string]any{
		"invalid_request: a note needs a title (argument title)":                  {"title": ""},
		"invalid_request: the title must be one line of text":                     {"title": "a\nb"},
		"invalid_request: the body is 16385 bytes; at most 16384 (argument body)": {"title": "t", "body": strings.Repeat("x", vigil.MaxNoteBodyBytes+1)},
	} {
		if msg := callErr(t, cs, "note_write", want); !strings.HasPrefix(msg, args) {
			t.Errorf("note_write(%v) = %q, want %q", want, msg, args)
		}
	}
}
