package engine_test

import (
	"testing"

	"github.com/vigil-run/vigil"
)

// TestRegisterRefusesANoteWithNUL: a watch's note holding a NUL byte
// ("note":"a\u0000b" in JSON) is refused naming the note in every store,
// as a note message's body is. PostgreSQL cannot store such a text, so
// there the registration was answered 500 internal, while SQLite kept it.
func TestRegisterRefusesANoteWithNUL(t *testing.T) {
	for name, open := range listStores(t) {
		t.Run(name, func(t *testing.T) {
			v := newEnv(t, envOpts{store: open(t)})
			_, err := v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(`{"in":"1h"}`), Note: "merge PR 41\x00 when green"})
			if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "note" {
				t.Errorf("Register with a NUL in its note = %v (code %q field %q), want invalid_request on note", err, vigil.ErrorCode(err), vigil.ErrorField(err))
			}
		})
	}
}
