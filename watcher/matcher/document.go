package matcher

import (
	"bytes"
	"slices"

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
// document, names a key twice. It walks the text without recursion.
func hasDuplicateKeys(doc []byte) bool {
	var stack []*keySet // nil for an array
	key := false        // the next string is a key of the top object
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{':
			stack = append(stack, &keySet{})
			key = true
		case '[':
			stack = append(stack, nil)
			key = false
		case '}', ']':
			stack = stack[:len(stack)-1]
			key = false
		case ',':
			key = len(stack) > 0 && stack[len(stack)-1] != nil
		case '"':
			end := stringEnd(doc, i)
			if key {
				raw := doc[i+1 : end]
				k := string(raw)
				if bytes.IndexByte(raw, '\\') >= 0 {
					k = gjson.ParseBytes(doc[i : end+1]).Str
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

// keySet is the keys one object has named so far.
type keySet struct {
	keys []string
	seen map[string]struct{}
}

// add records k and reports whether it was there already. Small objects
// are searched in a slice; larger ones get a map.
func (s *keySet) add(k string) bool {
	if s.seen != nil {
		if _, dup := s.seen[k]; dup {
			return true
		}
		s.seen[k] = struct{}{}
		return false
	}
	if slices.Contains(s.keys, k) {
		return true
	}
	s.keys = append(s.keys, k)
	if len(s.keys) > 16 {
		s.seen = make(map[string]struct{}, 2*len(s.keys))
		for _, k := range s.keys {
			s.seen[k] = struct{}{}
		}
		s.keys = nil
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
