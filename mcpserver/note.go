package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
)

const descNote = `Leave a note in a recipient's inbox without a watch: a one-line title (at most 200 bytes) and an optional body (at most 16 KiB). It is delivered like a watch's outcome — the recipient's next session sees it once, through its notice hook, inbox_read or the channel push. Use it to hand findings to another agent session, or to your own next session.`

type noteIn struct {
	Recipient string `json:"recipient,omitempty" jsonschema:"whose inbox gets the note (letters, digits and . _ : @ + -); leave it out for this connection's default"`
	Title     string `json:"title" jsonschema:"what the note is about, in one line (at most 200 bytes)"`
	Body      string `json:"body,omitempty" jsonschema:"the note itself (at most 16 KiB of text)"`
}

type noteOut struct {
	Message Message `json:"message" jsonschema:"the note as it landed in the inbox"`
}

// addNote registers note_write.
func (s *server) addNote() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "note_write", Title: "Leave a note in an inbox", Description: descNote,
		InputSchema: mustSchema[noteIn](nil), OutputSchema: mustSchema[noteOut](nil),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}}, s.note)
}

func (s *server) note(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteOut, error) {
	ctx, c, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, noteOut{}, err
	}
	r, err := s.recipientFor(in.Recipient, c)
	if err != nil {
		return nil, noteOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	m, err := s.svc.Note(ctx, vigil.NoteRequest{Recipient: r, Title: in.Title, Body: in.Body})
	if err != nil {
		return nil, noteOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	return nil, noteOut{Message: messagesOut([]*vigil.Message{m})[0]}, nil
}
