package engine

import (
	"context"
	"encoding/json"

	"github.com/vigil-run/vigil"
)

// Note implements vigil.Service: the note is one mailbox message of type
// note with no watch, announced like an outcome's message, so every
// reader (notice, inbox_read, the channel push, the event stream) gets it.
func (e *Engine) Note(ctx context.Context, r vigil.NoteRequest) (*vigil.Message, error) {
	if err := vigil.ValidName("recipient", r.Recipient, e.limits.MaxNameBytes); err != nil {
		return nil, err
	}
	if err := vigil.ValidNote(r.Title, r.Body); err != nil {
		return nil, err
	}
	s, scoped := vigil.ScopeFrom(ctx)
	if scoped && !s.Allows(r.Recipient) {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", r.Recipient)
	}
	d := vigil.NoteData{Title: r.Title, Body: r.Body}
	if scoped {
		d.From = s.TokenID
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	now := e.now()
	m, err := e.store.MessageCreate(ctx, &vigil.Message{ID: e.newID(), Recipient: r.Recipient, Type: vigil.MessageNote,
		Text: r.Title, Data: data, CreatedAt: now})
	if err != nil {
		return nil, err
	}
	e.sched.ArmPrune(now.Add(e.limits.RetentionMessages))
	e.hub.publish(vigil.MessageEvent(m))
	return m, nil
}
