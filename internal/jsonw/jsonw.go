// Package jsonw appends JSON as encoding/json writes it, without
// reflection, for the encoders of the root package and the engine that
// run once per watch (a registration's answer, a settlement's message).
// It imports only the standard library.
package jsonw

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// String appends s as encoding/json writes a string: printable ASCII but
// the quote, the backslash and the HTML characters as it is, the rest
// through encoding/json itself.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// KeyString appends key, then s as String does.
func KeyString(b []byte, key, s string) []byte {
	return String(append(b, key...), s)
}

// OptString is KeyString for an omitempty string field: nothing when s is
// empty.
func OptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return KeyString(b, key, s)
}

// OptInt appends an omitempty int field: nothing when n is 0.
func OptInt(b []byte, key string, n int) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(n), 10)
}

// Marshaled appends key, then v through encoding/json.
func Marshaled(b []byte, key string, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(append(b, key...), j...), nil
}

// Raw appends raw as encoding/json writes a json.RawMessage field: nil as
// null, the rest compacted with the HTML characters escaped; raw that is
// not JSON is an error.
func Raw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(b)
	json.HTMLEscape(out, c.Bytes())
	return out.Bytes(), nil
}

// StringMap appends m as encoding/json writes a map[string]string: its
// keys sorted.
func StringMap(b []byte, m map[string]string) []byte {
	return Object(b, m, String)
}

// Object appends m as encoding/json writes a map with string keys: its
// keys sorted, each value appended by value.
func Object[V any](b []byte, m map[string]V, value func(b []byte, v V) []byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, k)
		b = value(append(b, ':'), m[k])
	}
	return append(b, '}')
}
