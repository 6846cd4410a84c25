package httpapi

import (
	"encoding/json"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/jsonscan"
)

// quickRegister decodes a registration (the body of POST /v1/watches, an
// item of a batch) without reflection, for the shape clients send: one
// object of known keys, each once, with plain strings (no escape, valid
// UTF-8), plain integers, booleans, and a predicate and delivery options
// that are JSON objects or arrays with no key given twice. It reports
// false, having changed nothing, for anything else, and the caller then
// decodes b as before (duplicateKey, then encoding/json refusing unknown
// fields): so every refusal keeps its code and message, and what it
// accepts it reads as encoding/json does (TestQuickRegisterMatches).
// On every registration the decoder's reflection cost more than the rest
// of the handler.
func quickRegister(b []byte, req *vigil.RegisterRequest) bool {
	s := scanner{jsonscan.Scanner{B: b}}
	s.Space()
	var out vigil.RegisterRequest
	var seen uint32
	ok := s.Object(func(key string) bool {
		f := registerField(key)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		return s.registerValue(f, &out)
	})
	return ok && s.end(req, &out)
}

// The fields of vigil.RegisterRequest quickRegister reads.
const (
	rfKind = iota
	rfPredicate
	rfRecipient
	rfDeadline
	rfEvery
	rfMode
	rfNote
	rfLabels
	rfDeliver
	rfIdempotencyKey
	rfMaxPolls
	rfMaxErrors
	rfStable
	rfStableFor
	rfObserve
)

// registerField returns the field of a JSON key of vigil.RegisterRequest,
// -1 for another key.
func registerField(key string) int {
	switch key {
	case "kind":
		return rfKind
	case "predicate":
		return rfPredicate
	case "recipient":
		return rfRecipient
	case "deadline":
		return rfDeadline
	case "every":
		return rfEvery
	case "mode":
		return rfMode
	case "note":
		return rfNote
	case "labels":
		return rfLabels
	case "deliver":
		return rfDeliver
	case "idempotency_key":
		return rfIdempotencyKey
	case "max_polls":
		return rfMaxPolls
	case "max_errors":
		return rfMaxErrors
	case "stable":
		return rfStable
	case "stable_for":
		return rfStableFor
	case "observe":
		return rfObserve
	}
	return -1
}

func (s *scanner) registerValue(f int, r *vigil.RegisterRequest) bool {
	var ok bool
	switch f {
	case rfKind:
		var v string
		v, ok = s.PlainString()
		r.Kind = vigil.Kind(v)
	case rfPredicate:
		r.Predicate, ok = s.object()
	case rfRecipient:
		r.Recipient, ok = s.PlainString()
	case rfDeadline:
		r.Deadline, ok = s.PlainString()
	case rfEvery:
		r.Every, ok = s.PlainString()
	case rfMode:
		var v string
		v, ok = s.PlainString()
		r.Mode = vigil.Mode(v)
	case rfNote:
		r.Note, ok = s.PlainString()
	case rfLabels:
		r.Labels, ok = s.Labels(false)
	case rfDeliver:
		r.Deliver, ok = s.object()
	case rfIdempotencyKey:
		r.IdempotencyKey, ok = s.PlainString()
	case rfMaxPolls:
		r.MaxPolls, ok = s.Integer()
	case rfMaxErrors:
		r.MaxErrors, ok = s.Integer()
	case rfStable:
		r.Stable, ok = s.Integer()
	case rfStableFor:
		r.StableFor, ok = s.PlainString()
	case rfObserve:
		r.Observe, ok = s.Boolean()
	}
	return ok
}

// scanner is jsonscan.Scanner with what registrations need besides.
type scanner struct{ jsonscan.Scanner }

// end accepts the registration just closed if only white space follows.
func (s *scanner) end(req, out *vigil.RegisterRequest) bool {
	if !s.End() {
		return false
	}
	*req = *out
	return true
}

// object returns a copy of the object or array that comes next, which must
// be JSON with no key given twice at any depth (duplicateKey).
func (s *scanner) object() (json.RawMessage, bool) {
	if s.I >= len(s.B) || (s.B[s.I] != '{' && s.B[s.I] != '[') {
		return nil, false
	}
	v, ok := s.Skip()
	if !ok || !json.Valid(v) || duplicateKey(v) != nil {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}

// quickBatch splits a batch body {"watches": [...]} into its items, for a
// body that is JSON and has exactly that shape; it reports false for
// anything else, and decodeBatch reads the body as before (with its
// refusals). Items are slices of b.
func quickBatch(b []byte) ([]json.RawMessage, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	s := jsonscan.Scanner{B: b}
	s.Space()
	if !s.Byte('{') {
		return nil, false
	}
	s.Space()
	if key, ok := s.PlainString(); !ok || key != "watches" {
		return nil, false
	}
	s.Space()
	if !s.Byte(':') {
		return nil, false
	}
	s.Space()
	if !s.Byte('[') {
		return nil, false
	}
	var items []json.RawMessage
	s.Space()
	if !s.Byte(']') {
		for {
			s.Space()
			v, ok := s.Skip()
			if !ok {
				return nil, false
			}
			items = append(items, json.RawMessage(v[:len(v):len(v)]))
			s.Space()
			if s.Byte(']') {
				break
			}
			if !s.Byte(',') {
				return nil, false
			}
		}
	}
	s.Space()
	if !s.Byte('}') {
		return nil, false
	}
	return items, s.End()
}
