// Package jsonscan reads, a token at a time, the plain JSON a vigil client
// sends or a vigil daemon answers, for the decoders that read it without
// reflection. It imports only the standard library, so the root package
// may use it.
package jsonscan

import (
	"strconv"
	"unicode/utf8"
)

// Scanner reads the plain JSON a vigil client sends or a vigil daemon
// answers, a token at a time, for the decoders that read it without
// reflection (the daemon's registrations, the client's batch answers).
// Each method reports false for what it does not read exactly as
// encoding/json would, and the caller then leaves the whole text to
// encoding/json.
type Scanner struct {
	B []byte // the text
	I int    // the offset of the next byte to read
}

// Space skips white space.
func (s *Scanner) Space() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Byte consumes c if it comes next.
func (s *Scanner) Byte(c byte) bool {
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.Space()
	return s.I == len(s.B)
}

// PlainString reads a string with no escape, no control character and
// valid UTF-8: what encoding/json decodes to its bytes unchanged.
func (s *Scanner) PlainString() (string, bool) {
	if !s.Byte('"') {
		return "", false
	}
	start := s.I
	ascii := true
	for ; s.I < len(s.B); s.I++ {
		switch c := s.B[s.I]; {
		case c == '"':
			v := s.B[start:s.I]
			s.I++
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

// Integer reads a JSON integer of at most nine digits.
func (s *Scanner) Integer() (int, bool) {
	v, ok := s.integer(9)
	return int(v), ok
}

// Int64 reads a JSON integer of at most eighteen digits (a Unix time in
// milliseconds, a sequence number): any fits an int64.
func (s *Scanner) Int64() (int64, bool) { return s.integer(18) }

// integer reads a JSON integer of at most most digits.
func (s *Scanner) integer(most int) (int64, bool) {
	start := s.I
	s.Byte('-')
	digits := s.I
	for s.I < len(s.B) && '0' <= s.B[s.I] && s.B[s.I] <= '9' {
		s.I++
	}
	n := s.I - digits
	if n == 0 || n > most || (n > 1 && s.B[digits] == '0') {
		return 0, false
	}
	if s.I < len(s.B) {
		switch s.B[s.I] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(s.B[start:s.I]), 10, 64)
	return v, err == nil
}

// Boolean reads true or false.
func (s *Scanner) Boolean() (bool, bool) {
	switch {
	case len(s.B)-s.I >= 4 && string(s.B[s.I:s.I+4]) == "true":
		s.I += 4
		return true, true
	case len(s.B)-s.I >= 5 && string(s.B[s.I:s.I+5]) == "false":
		s.I += 5
		return false, true
	}
	return false, false
}

// Skip moves past the value that comes next and returns its bytes,
// trusting it to be JSON (the caller checks it, or decodes it strictly):
// a string to its closing quote, an object or array to its closing
// bracket, anything else to the next delimiter.
func (s *Scanner) Skip() ([]byte, bool) {
	start := s.I
	if s.I >= len(s.B) {
		return nil, false
	}
	switch s.B[s.I] {
	case '"':
		if !s.skipString() {
			return nil, false
		}
		return s.B[start:s.I], true
	case '{', '[':
		depth := 0
		for s.I < len(s.B) {
			switch s.B[s.I] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.I++
					return s.B[start:s.I], true
				}
			case '"':
				if !s.skipString() {
					return nil, false
				}
				continue
			}
			s.I++
		}
		return nil, false
	}
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.B[start:s.I], s.I > start
		}
		s.I++
	}
	return s.B[start:s.I], s.I > start
}

// skipString moves past the string that starts at I.
func (s *Scanner) skipString() bool {
	for s.I++; s.I < len(s.B); s.I++ {
		switch s.B[s.I] {
		case '\\':
			s.I++
		case '"':
			s.I++
			return true
		}
	}
	return false
}

// Object reads an object whose keys are plain strings: for each member it
// reads the key and the colon, skips white space and calls value, which
// must read the member's value (and may refuse the key). It reports
// whether the whole object was read and every value accepted.
func (s *Scanner) Object(value func(key string) bool) bool {
	if !s.Byte('{') {
		return false
	}
	s.Space()
	if s.Byte('}') {
		return true
	}
	for {
		s.Space()
		key, ok := s.PlainString()
		if !ok {
			return false
		}
		s.Space()
		if !s.Byte(':') {
			return false
		}
		s.Space()
		if !value(key) {
			return false
		}
		s.Space()
		if s.Byte('}') {
			return true
		}
		if !s.Byte(',') {
			return false
		}
	}
}

// Labels reads an object of plain strings. A key given twice is refused
// unless twiceOK, and then the last value wins, as encoding/json has it.
func (s *Scanner) Labels(twiceOK bool) (map[string]string, bool) {
	m := map[string]string{}
	ok := s.Object(func(k string) bool {
		v, ok := s.PlainString()
		if _, twice := m[k]; !ok || (twice && !twiceOK) {
			return false
		}
		m[k] = v
		return true
	})
	if !ok {
		return nil, false
	}
	return m, true
}
