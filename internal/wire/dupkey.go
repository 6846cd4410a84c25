package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DuplicateKey returns the path of a key that an object of the JSON text b
// gives twice, at any depth ("predicate.headers.Accept", "x[1].a"), and
// true; false if none, or if b does not parse (its decoder says where). encoding/json
// would keep the last silently, so what the writer meant is not known. The
// keys of the outermost object, which is decoded into a struct whose
// fields encoding/json matches ignoring case, are compared as it matches
// them: "kind" and "KIND" are one field given twice. Keys deeper are
// compared as they are (a label "a" and a label "A" are two).
func DuplicateKey(b []byte) (string, bool) {
	// A scan of the bytes, not json.Decoder.Token: a registration is
	// read on every call, and the tokenizer's allocations cost more than
	// decoding it.
	type frame struct {
		obj  bool
		keys []string        // an object's keys so far, the first few
		set  map[string]bool // all of them, past the first few
		cur  string          // an object's key being read
		idx  int             // an array's element being read
	}
	var st []frame
	path := func() string {
		var p strings.Builder
		for _, f := range st[:len(st)-1] {
			switch {
			case !f.obj:
				fmt.Fprintf(&p, "[%d]", f.idx)
			case p.Len() == 0:
				p.WriteString(f.cur)
			default:
				p.WriteString("." + f.cur)
			}
		}
		return p.String()
	}
	for i := 0; i < len(b); {
		switch b[i] {
		case '{':
			st = append(st, frame{obj: true})
		case '[':
			st = append(st, frame{})
		case '}', ']':
			if len(st) == 0 {
				return "", false // not JSON: the decoder will say where
			}
			st = st[:len(st)-1]
			if len(st) == 0 {
				return "", false // one whole value read
			}
		case ',':
			if len(st) > 0 && !st[len(st)-1].obj {
				st[len(st)-1].idx++
			}
		case '"':
			end, escaped := stringEnd(b, i)
			if end < 0 {
				return "", false
			}
			k := end
			for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\r' || b[k] == '\n') {
				k++
			}
			if len(st) > 0 && st[len(st)-1].obj && k < len(b) && b[k] == ':' {
				var key string
				if !escaped {
					key = string(b[i+1 : end-1])
				} else if err := json.Unmarshal(b[i:end], &key); err != nil {
					return "", false
				}
				seen := key
				if len(st) == 1 {
					seen = foldName(key)
				}
				f := &st[len(st)-1]
				if slices.Contains(f.keys, seen) || f.set[seen] {
					if pp := path(); pp != "" {
						return pp + "." + key, true
					}
					return key, true
				}
				// A linear look among a few keys; a map past them, so that
				// an object of many keys costs no more than its size.
				switch {
				case f.set != nil:
					f.set[seen] = true
				case len(f.keys) < 16:
					f.keys = append(f.keys, seen)
				default:
					f.set = map[string]bool{seen: true}
				}
				f.cur = key
			}
			i = end
			continue
		}
		i++
	}
	return "", false
}

// foldName folds a key as encoding/json does to match it to a struct
// field: foldName(x) == foldName(y) exactly when bytes.EqualFold(x, y).
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'a' <= c && c <= 'z' {
			ascii = false
			break
		}
	}
	if ascii {
		return s // upper case already: nothing to fold, nothing to copy
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		for {
			// The smallest rune of r's fold orbit stands for all of them.
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return string(out)
}

// stringEnd returns the index just past the JSON string starting at
// b[i] (a quote), and whether it holds an escape; -1 if it does not end.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}
