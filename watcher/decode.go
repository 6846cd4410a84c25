package watcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// Bounds shared by every watcher's decoder.
const (
	// MaxPredicateBytes bounds the JSON a watcher decodes. The engine
	// applies its own, usually smaller, limit to whole predicates first.
	MaxPredicateBytes = 1 << 20
	// MaxDepth bounds how deeply a predicate's JSON may nest.
	MaxDepth = 32
)

// InvalidPredicate returns an invalid_predicate error about one field of a
// predicate. field is relative to the predicate ("url", "done[1].matches");
// "" means the predicate as a whole. The message is one sentence about the
// field and is shown to the caller as is.
func InvalidPredicate(field, format string, args ...any) error {
	return &vigil.Error{Code: vigil.CodeInvalidPredicate, Field: PredicateField(field),
		Message: PredicateField(field) + " " + fmt.Sprintf(format, args...)}
}

// PredicateField returns the request field name of a predicate field:
// "predicate.url" for "url", "predicate" for "".
func PredicateField(field string) string {
	if field == "" {
		return "predicate"
	}
	return "predicate." + field
}

// JoinField joins a field prefix and a name: JoinField("done[1]", "path") is
// "done[1].path"; an empty prefix returns name.
func JoinField(prefix, name string) string {
	if prefix == "" {
		return name
	}
	if name == "" {
		return prefix
	}
	return prefix + "." + name
}

// Unobservable returns a watch_unobservable error. The message must name
// the daemon setting to change.
func Unobservable(format string, args ...any) error {
	return vigil.Errorf(vigil.CodeWatchUnobservable, format, args...)
}

// Decode decodes the JSON object raw into v, strictly: raw must be one JSON
// object, at most MaxPredicateBytes long and MaxDepth deep, with no
// duplicate keys, no unknown fields (when v is a struct) and nothing after
// the object. When v is a struct, whose fields encoding/json matches
// ignoring case, two keys of the object that differ only in case ("url",
// "URL") are one field given twice, refused as such rather than the last
// one winning. Refusals are invalid_predicate errors naming the field at
// fault; field is the prefix of every name ("" for the predicate itself,
// "done[0]" for a nested object).
func Decode(raw json.RawMessage, field string, v any) error {
	if len(raw) > MaxPredicateBytes {
		return InvalidPredicate(field, "is larger than %d bytes", MaxPredicateBytes)
	}
	if err := checkObject(raw, field, isStruct(v)); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return decodeError(err, field, v)
	}
	return nil
}

// DecodeObject decodes the JSON object raw into a map of its members,
// applying the checks of Decode. The caller decides which keys it knows.
func DecodeObject(raw json.RawMessage, field string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := Decode(raw, field, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// isStruct reports whether v is a pointer to a struct.
func isStruct(v any) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.Kind() == reflect.Struct
}

// checkObject walks raw's tokens once: it must hold exactly one JSON object,
// no deeper than MaxDepth, without duplicate keys. With fold, the keys of
// the outermost object (a struct's fields) are compared ignoring case.
func checkObject(raw json.RawMessage, field string, fold bool) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return InvalidPredicate(field, "is empty: send a JSON object")
		}
		return InvalidPredicate(field, "is not valid JSON")
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return InvalidPredicate(field, "must be a JSON object")
	}
	if err := walkObject(d, field, 1, fold); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return InvalidPredicate(field, "has data after the JSON object")
	}
	return nil
}

func walkObject(d *json.Decoder, field string, depth int, fold bool) error {
	if depth > MaxDepth {
		return InvalidPredicate(field, "nests deeper than %d levels", MaxDepth)
	}
	seen := make(map[string]bool)
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return InvalidPredicate(field, "is not valid JSON")
		}
		key, _ := tok.(string)
		name := JoinField(field, key)
		k := key
		if fold {
			// As encoding/json folds a key to match it to a field.
			k = strings.ToLower(strings.ToUpper(key))
		}
		if seen[k] {
			return InvalidPredicate(name, "appears twice")
		}
		seen[k] = true
		if err := walkValue(d, name, depth); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil { // '}'
		return InvalidPredicate(field, "is not valid JSON")
	}
	return nil
}

func walkValue(d *json.Decoder, field string, depth int) error {
	tok, err := d.Token()
	if err != nil {
		return InvalidPredicate(field, "is not valid JSON")
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		return walkObject(d, field, depth+1, false)
	case '[':
		if depth+1 > MaxDepth {
			return InvalidPredicate(field, "nests deeper than %d levels", MaxDepth)
		}
		for i := 0; d.More(); i++ {
			if err := walkValue(d, fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil { // ']'
			return InvalidPredicate(field, "is not valid JSON")
		}
	}
	return nil
}

func decodeError(err error, field string, v any) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		name := JoinField(field, typeErr.Field)
		if typeErr.Type == nil {
			return InvalidPredicate(name, "has the wrong type")
		}
		if isInt(typeErr.Type) && strings.HasPrefix(typeErr.Value, "number") {
			return InvalidPredicate(name, "must be a whole number in range")
		}
		return InvalidPredicate(name, "must be %s", jsonTypeName(typeErr.Type))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return InvalidPredicate(field, "is not valid JSON")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, uerr := strconv.Unquote(name); uerr == nil {
			name = unq
		}
		known := knownFields(v)
		if len(known) > 0 {
			return InvalidPredicate(JoinField(field, name), "is not a known field (known: %s)", strings.Join(known, ", "))
		}
		return InvalidPredicate(JoinField(field, name), "is not a known field")
	}
	return InvalidPredicate(field, "could not be read: %v", err)
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	if isInt(t) {
		return "a whole number"
	}
	return "of another type"
}

// knownFields lists the JSON names of v's struct fields, for a refusal that
// helps the caller spell them.
func knownFields(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	return structFields(t)
}

// structFields lists the JSON names of struct type t's fields, those of
// an embedded struct without a name of its own in its place, as
// encoding/json promotes them.
func structFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				names = append(names, structFields(ft)...)
				continue
			}
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// Encode returns the canonical JSON encoding of v: object keys sorted, no
// insignificant space. It is a fixed point of vigil.CanonicalJSON, so
// identity hashing sees one spelling whoever re-encodes it.
func Encode(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return vigil.CanonicalJSON(b)
}

// DurationField parses an optional duration field spelled as a string
// ("10s", "2m"): "" gives def; a duration must be more than zero and at
// most max. Refusals name the field.
func DurationField(field, s string, def, max time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := vigil.ParseDuration(s)
	if err != nil {
		return 0, InvalidPredicate(field, "must be a duration like 10s or 2m")
	}
	if d <= 0 {
		return 0, InvalidPredicate(field, "must be more than zero")
	}
	if d > max {
		return 0, InvalidPredicate(field, "must be at most %s", vigil.FormatDuration(max))
	}
	return d, nil
}

// Clip shortens s to at most n bytes, cutting on a rune boundary and
// marking the cut with "…". Invalid UTF-8 is replaced, so the result is
// safe to show and to store as JSON.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := max(n-len("…"), 0)
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ClipTail keeps at most the last n bytes of s, cutting on a rune boundary
// and marking the cut with a leading "…".
func ClipTail(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	start := len(s) - max(n-len("…"), 0)
	for start < len(s) && !isRuneStart(s[start]) {
		start++
	}
	return "…" + s[start:]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
