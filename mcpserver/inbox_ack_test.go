package mcpserver_test

import (
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/mcpserver"
)

// TestInboxReadAfterAcksOnlyWhatItShowed: inbox_read with after past the
// reader's cursor shows the messages after it, but must not mark read
// (ack, on by default) the unread ones before it, which it did not show:
// they would never reach the agent, through the tool or the notice hook
// that shares the reader. A look back (after at or below the cursor)
// still marks what it showed read.
func TestInboxReadAfterAcksOnlyWhatItShowed(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	var seqs []int64
	for _, title := range []string{"one", "two", "three", "four"} {
		m, err := e.Note(t.Context(), vigil.NoteRequest{Recipient: "agent-1", Title: title})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.Seq)
	}
	// Ahead of the cursor (nothing read yet): shows three and four.
	got := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"after": seqs[1]})
	if len(got.Messages) != 2 || got.Messages[0].Seq != seqs[2] {
		t.Fatalf("inbox_read after %d = %+v, want three and four", seqs[1], got.Messages)
	}
	// one and two were never shown: they are still unread.
	unread := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"limit": 1})
	if len(unread.Messages) != 1 || unread.Messages[0].Seq != seqs[0] {
		t.Fatalf("unread after a read ahead = %+v, want one (seq %d), never shown", unread.Messages, seqs[0])
	}
	// The cursor is now at one: a read after it is contiguous and marks
	// what it showed read.
	callOK[inboxResult](t, cs, "inbox_read", map[string]any{"after": seqs[0], "limit": 2})
	if rest := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(rest.Messages) != 1 || rest.Messages[0].Seq != seqs[3] {
		t.Fatalf("unread after a contiguous read = %+v, want four", rest.Messages)
	}
}
