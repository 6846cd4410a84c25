package matcher

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// bom is the UTF-8 byte order mark some servers write before JSON.
var bom = []byte("\xef\xbb\xbf")

// document returns doc as the matchers read it, and whether it is JSON:
// one leading UTF-8 byte order mark dropped, and, in an object that names
// a key twice, only the last member of that key kept (as JSON.parse, jq,
// Python and encoding/json read it; gjson alone would find the first).
func document(doc []byte) ([]byte, bool) {
	doc = bytes.TrimPrefix(doc, bom)
	if !gjson.ValidBytes(doc) {
		return doc, false
	}
	if !hasDuplicateKeys(doc) {
		return doc, true
	}
	var b bytes.Buffer
	b.Grow(len(doc))
	lastWins(&b, gjson.ParseBytes(doc))
	return b.Bytes(), true
}

// hasDuplicateKeys reports whether some object of doc, a valid JSON
// document, names a key twice. It walks the text without recursion, and
// keeps each object's keys as slices of doc (unescaped only when they
// hold an escape), reusing its frames from object to object.
func hasDuplicateKeys(doc []byte) bool {
	var stack []keySet
	key := false // the next string is a key of the top object
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{', '[':
			if len(stack) < cap(stack) {
				stack = stack[:len(stack)+1]
				stack[len(stack)-1].reset(doc[i] == '{')
			} else {
				stack = append(stack, keySet{object: doc[i] == '{'})
			}
			key = doc[i] == '{'
		case '}', ']':
			stack = stack[:len(stack)-1]
			key = false
		case ',':
			key = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			end := stringEnd(doc, i)
			if key {
				k := doc[i+1 : end]
				if bytes.IndexByte(k, '\\') >= 0 {
					k = []byte(gjson.ParseBytes(doc[i : end+1]).Str)
				}
				if stack[len(stack)-1].add(k) {
					return true
				}
				key = false
			}
			i = end
		}
	}
	return false
}

// stringEnd returns the index of the quote that closes the JSON string
// opened at doc[start].
func stringEnd(doc []byte, start int) int {
	for i := start + 1; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(doc) - 1
}

// keySet is the keys one object has named so far (object false: an
// array's frame, which names none).
type keySet struct {
	object bool
	keys   [][]byte
	seen   map[string]struct{}
}

func (s *keySet) reset(object bool) {
	s.object, s.keys, s.seen = object, s.keys[:0], nil
}

// add records k and reports whether it was there already. Small objects
// are searched in a slice; larger ones get a map.
func (s *keySet) add(k []byte) bool {
	if s.seen != nil {
		if _, dup := s.seen[string(k)]; dup {
			return true
		}
		s.seen[string(k)] = struct{}{}
		return false
	}
	for _, o := range s.keys {
		if bytes.Equal(o, k) {
			return true
		}
	}
	s.keys = append(s.keys, k)
	if len(s.keys) > 16 {
		s.seen = make(map[string]struct{}, 2*len(s.keys))
		for _, o := range s.keys {
			s.seen[string(o)] = struct{}{}
		}
	}
	return false
}

// lastWins writes v with, in every object, only the last member of each
// key, where that member stands.
func lastWins(b *bytes.Buffer, v gjson.Result) {
	switch {
	case v.IsObject():
		type member struct{ k, v gjson.Result }
		var ms []member
		v.ForEach(func(k, v gjson.Result) bool { ms = append(ms, member{k, v}); return true })
		last := make(map[string]int, len(ms))
		for i, m := range ms {
			last[m.k.Str] = i
		}
		b.WriteByte('{')
		first := true
		for i, m := range ms {
			if last[m.k.Str] != i {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(m.k.Raw)
			b.WriteByte(':')
			lastWins(b, m.v)
		}
		b.WriteByte('}')
	case v.IsArray():
		b.WriteByte('[')
		first := true
		v.ForEach(func(_, e gjson.Result) bool {
			if !first {
				b.WriteByte(',')
			}
			first = false
			lastWins(b, e)
			return true
		})
		b.WriteByte(']')
	default:
		b.WriteString(v.Raw)
	}
}
