// Package storecheck holds the checks every store makes of what it is
// asked to write before it writes anything, so that the stores refuse the
// same input with the same error: a new watch and a new message.
package storecheck

import (
	"encoding/json"

	"github.com/vigil-run/vigil"
)

// NewWatch checks a watch to register, with the idempotency key and
// request hash it comes with.
func NewWatch(w *vigil.Watch, key, hash string) error {
	switch {
	case w == nil:
		return vigil.Errorf(vigil.CodeInvalidRequest, "no watch to create")
	case w.ID == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "the watch has no id")
	case w.Recipient == "":
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipient", "the watch has no recipient")
	case w.Kind == "":
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "kind", "the watch has no kind")
	case w.Identity == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "watch %s has no identity", w.ID)
	case w.CreatedAt.IsZero():
		return vigil.Errorf(vigil.CodeInvalidRequest, "watch %s has no creation time", w.ID)
	case w.State != "" && w.State != vigil.StatePending:
		return vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: a new watch is pending, not %s", w.ID, w.State)
	case key != "" && hash == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "an idempotency key needs the request hash")
	case len(w.Deliver) > 0 && !json.Valid(w.Deliver):
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "deliver", "watch %s: the delivery options are not JSON", w.ID)
	}
	return nil
}

// Message checks a message to append to a mailbox.
func Message(m *vigil.Message) error {
	switch {
	case m == nil:
		return vigil.Errorf(vigil.CodeInvalidRequest, "no message to create")
	case m.ID == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "the message has no id")
	case m.Recipient == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "message %s has no recipient", m.ID)
	case m.Type == "":
		return vigil.Errorf(vigil.CodeInvalidRequest, "message %s has no type", m.ID)
	case m.CreatedAt.IsZero():
		return vigil.Errorf(vigil.CodeInvalidRequest, "message %s has no creation time", m.ID)
	}
	return nil
}
