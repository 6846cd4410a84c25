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

// TestNoteWriteScoped checks note_write over HTTP acts within the token's
// scope: a token for A may not leave a note for B.
func TestNoteWriteScoped(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	a := h.connect(t, tokenA, nil)
	if got := callErr(t, a, "note_write", map[string]any{"recipient": "B", "title": "sneaky"}); !strings.HasPrefix(got, "not_found: ") {
		t.Errorf("note_write for B with A's token = %q, want not_found", got)
	}
	out := callOK[struct {
		Message mcpserver.Message `json:"message"`
	}](t, a, "note_write", map[string]any{"title": "for myself"})
	if out.Message.Text != "for myself" {
		t.Errorf("note_write with A's token = %+v", out.Message)
	}
	zero := int64(0)
	for r, want := range map[string]int{"A": 1, "B": 0} {
		p, err := h.eng.Messages(t.Context(), vigil.MessagesRequest{Recipient: r, After: &zero})
		if err != nil || len(p.Messages) != want {
			t.Errorf("%s's mailbox = %d messages, %v; want %d", r, len(p.Messages), err, want)
		}
	}
}
