package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/vigil-run/vigil"
)

// MaxCompletionData bounds the data a completion carries into the outcome.
const MaxCompletionData = 64 << 10

// completer is what the token watcher offers the engine: a check of a
// completion secret against a stored predicate, and the observation a
// completion makes.
type completer interface {
	CheckSecret(predicate json.RawMessage, secret string) bool
	Completion(status string, data json.RawMessage) vigil.Observation
	// Predicate is the canonical predicate of a watch whose secret is
	// secret.
	Predicate(secret string) (json.RawMessage, error)
}

// completionToken is what a token watch's registration returns: the watch
// id, so a completion finds its row directly, and the secret.
func completionToken(id, secret string) string { return id + "." + secret }

// completionSecret derives the secret of token watch id from key: the
// first 128 bits of HMAC-SHA256 over a label and the id, in unpadded
// base64url, as the token watcher spells a random one. The label keeps it
// apart from anything else the same key signs.
func completionSecret(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("vigil completion secret\x00"))
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// replayedToken is the completion token of w, a token watch whose
// registration was replayed, when its secret was derived from the key
// (not a random one, made before the key or without it).
func (e *Engine) replayedToken(w *vigil.Watch) string {
	if len(e.completionKey) == 0 || w.Kind != vigil.KindToken {
		return ""
	}
	wt, ok := e.watchers.Lookup(w.Kind)
	c, isToken := wt.(completer)
	if !ok || !isToken {
		return ""
	}
	secret := completionSecret(e.completionKey, w.ID)
	if !c.CheckSecret(w.Predicate, secret) {
		return ""
	}
	return completionToken(w.ID, secret)
}

var errUnknownToken = &vigil.Error{Code: vigil.CodeNotFound, Message: "no such completion token"}

// Complete implements vigil.Service. The token is the only credential: no
// scope applies. Whatever is wrong with a token (no such watch, not a
// token watch, a wrong secret) answers the same not_found.
func (e *Engine) Complete(ctx context.Context, r vigil.CompleteRequest) (*vigil.Watch, error) {
	switch r.Status {
	case vigil.CompleteSuccess, vigil.CompleteFailure:
	default:
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "status", "status must be %q or %q", vigil.CompleteSuccess, vigil.CompleteFailure)
	}
	if d := bytes.TrimSpace(r.Data); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		if len(d) > MaxCompletionData {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "data", "data is larger than %d bytes", MaxCompletionData)
		}
		var obj map[string]any
		if d[0] != '{' || json.Unmarshal(d, &obj) != nil {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "data", "data must be a JSON object")
		}
	}
	id, secret, ok := strings.Cut(r.Token, ".")
	if !ok || validID(id) != nil || secret == "" {
		return nil, errUnknownToken
	}
	w, err := e.store.WatchGet(ctx, id)
	if errors.Is(err, vigil.ErrNotFound) {
		return nil, errUnknownToken
	}
	if err != nil {
		return nil, err
	}
	wt, ok := e.watchers.Lookup(w.Kind)
	c, isToken := wt.(completer)
	if w.Kind != vigil.KindToken || !ok || !isToken || !c.CheckSecret(w.Predicate, secret) {
		return nil, errUnknownToken
	}
	if w.State != vigil.StatePending {
		return nil, alreadyCompleted(w)
	}
	won, err := e.probes.answer(ctx, w, c.Completion(r.Status, r.Data))
	if errors.Is(err, errPastDeadline) {
		return nil, pastDeadline(w)
	}
	if err != nil {
		return nil, err
	}
	got, err := e.store.WatchGet(context.WithoutCancel(ctx), id)
	if err != nil {
		return nil, err
	}
	if !won {
		return nil, alreadyCompleted(got)
	}
	return e.view(got), nil
}

// pastDeadline answers a completion that came after its watch's deadline:
// the watch expired (its expiry, due at the deadline, may not be written
// yet), and the completion changed nothing.
func pastDeadline(w *vigil.Watch) error {
	return vigil.Errorf(vigil.CodeConflict, "this completion came after its watch's deadline (%s): the watch has expired, and nothing changed",
		w.Deadline.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// alreadyCompleted answers a completion of a settled watch: the token is
// single-use, and a second call changes nothing.
func alreadyCompleted(w *vigil.Watch) error {
	return vigil.Errorf(vigil.CodeConflict, "this completion token was already used or its watch has ended (%s); nothing changed", w.State)
}
