package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

func TestNoteLandsInTheMailbox(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	events, err := v.eng.Subscribe(v.ctx, vigil.EventFilter{Recipient: "agent-2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"agent-1", "agent-2"}, TokenID: "tok1"})
	m, err := v.eng.Note(ctx, vigil.NoteRequest{Recipient: "agent-2", Title: "nightly findings", Body: "3 flaky tests\nsee log"})
	if err != nil {
		t.Fatalf("Note: %v", err)
	}
	if m.Seq == 0 || m.Type != vigil.MessageNote || m.Text != "nightly findings" || m.WatchID != "" {
		t.Fatalf("Note = %+v", m)
	}
	var d vigil.NoteData
	if err := json.Unmarshal(m.Data, &d); err != nil || d != (vigil.NoteData{Title: "nightly findings", Body: "3 flaky tests\nsee log", From: "tok1"}) {
		t.Fatalf("note data = %s (%v)", m.Data, err)
	}
	ev := <-events
	if ev.Type != vigil.EventMessage || ev.Seq != m.Seq || ev.Recipient != "agent-2" || ev.State != "" {
		t.Fatalf("event = %+v, want message.created seq %d", ev, m.Seq)
	}
	// Each reader sees it once, like an outcome.
	p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-2", Reader: "notice", Ack: true})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Seq != m.Seq {
		t.Fatalf("notice read %+v, %v", p.Messages, err)
	}
	if p, _ := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-2", Reader: "notice"}); len(p.Messages) != 0 {
		t.Fatalf("notice reads the note again: %+v", p.Messages)
	}
}

func TestNoteRefusals(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	scoped := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"agent-1"}})
	for _, tc := range []struct {
		name  string
		ctx   bool // scoped
		req   vigil.NoteRequest
		code  vigil.Code
		field string
	}{
		{"another recipient", true, vigil.NoteRequest{Recipient: "agent-2", Title: "t"}, vigil.CodeNotFound, ""},
		{"bad recipient", false, vigil.NoteRequest{Recipient: "a b", Title: "t"}, vigil.CodeInvalidRequest, "recipient"},
		{"no title", false, vigil.NoteRequest{Recipient: "agent-2", Title: "  "}, vigil.CodeInvalidRequest, "title"},
		{"long title", false, vigil.NoteRequest{Recipient: "agent-2", Title: strings.Repeat("x", vigil.MaxNoteTitleBytes+1)}, vigil.CodeInvalidRequest, "title"},
		{"two-line title", false, vigil.NoteRequest{Recipient: "agent-2", Title: "a\nb"}, vigil.CodeInvalidRequest, "title"},
		{"escape in title", false, vigil.NoteRequest{Recipient: "agent-2", Title: "a\x1b[2Jb"}, vigil.CodeInvalidRequest, "title"},
		{"long body", false, vigil.NoteRequest{Recipient: "agent-2", Title: "t", Body: strings.Repeat("x", vigil.MaxNoteBodyBytes+1)}, vigil.CodeInvalidRequest, "body"},
		{"binary body", false, vigil.NoteRequest{Recipient: "agent-2", Title: "t", Body: "\xff\xfe"}, vigil.CodeInvalidRequest, "body"},
	} {
		ctx := v.ctx
		if tc.ctx {
			ctx = scoped
		}
		_, err := v.eng.Note(ctx, tc.req)
		if vigil.ErrorCode(err) != tc.code || vigil.ErrorField(err) != tc.field {
			t.Errorf("%s: Note = %v (code %s, field %q), want %s on %q", tc.name, err, vigil.ErrorCode(err), vigil.ErrorField(err), tc.code, tc.field)
		}
	}
	for _, r := range []string{"agent-1", "agent-2"} {
		if ms := v.messages(r); len(ms) != 0 {
			t.Fatalf("refused notes wrote %+v", ms)
		}
	}
	// At the bounds it is taken.
	if _, err := v.eng.Note(scoped, vigil.NoteRequest{Recipient: "agent-1", Title: strings.Repeat("é", vigil.MaxNoteTitleBytes/2),
		Body: strings.Repeat("x", vigil.MaxNoteBodyBytes)}); err != nil {
		t.Fatalf("a note at the bounds: %v", err)
	}
}
