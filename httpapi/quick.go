package httpapi

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
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
	s := scanner{b: b}
	s.space()
	if !s.byte('{') {
		return false
	}
	var out vigil.RegisterRequest
	var seen uint32
	s.space()
	if s.byte('}') {
		return s.end(req, &out)
	}
	for {
		s.space()
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.space()
		if !s.byte(':') {
			return false
		}
		s.space()
		f := registerField(key)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		if !s.registerValue(f, &out) {
			return false
		}
		s.space()
		if s.byte('}') {
			return s.end(req, &out)
		}
		if !s.byte(',') {
			return false
		}
	}
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
		v, ok = s.plainString()
		r.Kind = vigil.Kind(v)
	case rfPredicate:
		r.Predicate, ok = s.object()
	case rfRecipient:
		r.Recipient, ok = s.plainString()
	case rfDeadline:
		r.Deadline, ok = s.plainString()
	case rfEvery:
		r.Every, ok = s.plainString()
	case rfMode:
		var v string
		v, ok = s.plainString()
		r.Mode = vigil.Mode(v)
	case rfNote:
		r.Note, ok = s.plainString()
	case rfLabels:
		r.Labels, ok = s.labels()
	case rfDeliver:
		r.Deliver, ok = s.object()
	case rfIdempotencyKey:
		r.IdempotencyKey, ok = s.plainString()
	case rfMaxPolls:
		r.MaxPolls, ok = s.integer()
	case rfMaxErrors:
		r.MaxErrors, ok = s.integer()
	case rfStable:
		r.Stable, ok = s.integer()
	case rfStableFor:
		r.StableFor, ok = s.plainString()
	case rfObserve:
		r.Observe, ok = s.boolean()
	}
	return ok
}

// scanner reads b from i, for quickRegister and quickBatch.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c if it comes next.
func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end accepts the registration just closed if only white space follows.
func (s *scanner) end(req, out *vigil.RegisterRequest) bool {
	s.space()
	if s.i != len(s.b) {
		return false
	}
	*req = *out
	return true
}

// plainString reads a string with no escape, no control character and
// valid UTF-8: what encoding/json decodes to its bytes unchanged.
func (s *scanner) plainString() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	ascii := true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(v) {
				return "", false
			}
			return string(v), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// integer reads a JSON integer of at most nine digits.
func (s *scanner) integer() (int, bool) {
	start := s.i
	s.byte('-')
	digits := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	if n == 0 || n > 9 || (n > 1 && s.b[digits] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.Atoi(string(s.b[start:s.i]))
	return v, err == nil
}

// boolean reads true or false.
func (s *scanner) boolean() (bool, bool) {
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// object returns a copy of the object or array that comes next, which must
// be JSON with no key given twice at any depth (duplicateKey).
func (s *scanner) object() (json.RawMessage, bool) {
	start := s.i
	if s.i >= len(s.b) || (s.b[s.i] != '{' && s.b[s.i] != '[') {
		return nil, false
	}
	if !s.skip() {
		return nil, false
	}
	v := s.b[start:s.i]
	if !json.Valid(v) || duplicateKey(v) != nil {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}

// skip moves past the value that comes next, trusting it to be JSON (the
// caller checks it): strings to their closing quote, objects and arrays to
// their closing bracket, anything else to the next delimiter.
func (s *scanner) skip() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		end, _ := stringEnd(s.b, s.i)
		if end < 0 {
			return false
		}
		s.i = end
		return true
	case '{', '[':
		depth := 0
		for ; s.i < len(s.b); s.i++ {
			switch s.b[s.i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			case '"':
				end, _ := stringEnd(s.b, s.i)
				if end < 0 {
					return false
				}
				s.i = end - 1
			}
		}
		return false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.i > start
		}
		s.i++
	}
	return s.i > start
}

// labels reads an object of plain strings, no key given twice.
func (s *scanner) labels() (map[string]string, bool) {
	if !s.byte('{') {
		return nil, false
	}
	m := map[string]string{}
	s.space()
	if s.byte('}') {
		return m, true
	}
	for {
		s.space()
		k, ok := s.plainString()
		if !ok {
			return nil, false
		}
		s.space()
		if !s.byte(':') {
			return nil, false
		}
		s.space()
		v, ok := s.plainString()
		if _, twice := m[k]; !ok || twice {
			return nil, false
		}
		m[k] = v
		s.space()
		if s.byte('}') {
			return m, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// quickBatch splits a batch body {"watches": [...]} into its items, for a
// body that is JSON and has exactly that shape; it reports false for
// anything else, and decodeBatch reads the body as before (with its
// refusals). Items are slices of b.
func quickBatch(b []byte) ([]json.RawMessage, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	s := scanner{b: b}
	s.space()
	if !s.byte('{') {
		return nil, false
	}
	s.space()
	if key, ok := s.plainString(); !ok || key != "watches" {
		return nil, false
	}
	s.space()
	if !s.byte(':') {
		return nil, false
	}
	s.space()
	if !s.byte('[') {
		return nil, false
	}
	var items []json.RawMessage
	s.space()
	if !s.byte(']') {
		for {
			s.space()
			start := s.i
			if !s.skip() {
				return nil, false
			}
			items = append(items, json.RawMessage(b[start:s.i:s.i]))
			s.space()
			if s.byte(']') {
				break
			}
			if !s.byte(',') {
				return nil, false
			}
		}
	}
	s.space()
	if !s.byte('}') {
		return nil, false
	}
	s.space()
	return items, s.i == len(b)
}
