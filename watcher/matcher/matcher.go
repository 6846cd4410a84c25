// Package matcher holds the declarative matchers that the http and command
// watchers apply to a JSON document (a response body, a command's stdout).
//
// A matcher is a JSON object with a GJSON "path" and at most one operator:
//
//	{"path": "status.phase", "equals": "Ready"}
//	{"path": "items.#", "gte": 3}
//	{"path": "error", "exists": false}
//	{"path": "done"}
//
// A path with no operator asks that the value there be truthy: true, a
// non-zero number, a non-empty string, array or object (so {"done": false}
// does not match it). Whether a path is merely present is asked with
// exists, explicitly.
//
// The operators:
//
//   - equals, not_equals: any JSON value, compared as JSON (1 equals 1.0,
//     object key order does not matter, "1" does not equal 1).
//   - contains: a string; matches a string value holding it, or an array
//     holding it as an element.
//   - matches: an RE2 regular expression, matched against a string value
//     (or the text of a number or boolean).
//   - exists: true or false; whether the path is present.
//   - truthy: true or false; false, null, 0, "", [] and {} are falsy.
//   - gt, gte, lt, lte: a number, compared with a number value.
//
// Numbers compare as float64, except that an integer beyond 2^53 on
// either side is compared exactly, digit by digit: float64 would make
// 12345678901234567891 equal 12345678901234567890.
//
// Nothing is evaluated: there is no expression language. A matcher on a
// path that is missing does not match (so the watch stays pending), except
// {"exists": false}, which matches exactly then. A document that is not
// JSON matches nothing. A list of matchers matches when all of them do.
//
// The document is read as JSON.parse, jq and encoding/json read it: one
// UTF-8 byte order mark before it is dropped, and when an object names a
// key twice, the last member counts (for a path and for an equals on the
// whole object alike).
//
// The canonical form of a matcher is its object with the operator value
// normalised (numbers in shortest form, integers beyond 2^53 with every
// digit, objects with sorted keys); a list is
// sorted and duplicates dropped, since order does not change its meaning.
package matcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/tidwall/gjson"

	"github.com/vigil-run/vigil/watcher"
)

// Bounds on a matcher's input.
const (
	// MaxPath bounds a path's length in bytes.
	MaxPath = 256
	// MaxPattern bounds a regular expression's length in bytes.
	MaxPattern = 1024
	// MaxValue bounds the JSON text of an equals, not_equals or contains value.
	MaxValue = 4096
	// MaxList bounds how many matchers a list may hold.
	MaxList = 16
	// MaxFactValue bounds the found value recorded in an observation's facts.
	MaxFactValue = 256
	// maxSummaryValue bounds the found value shown in a summary line.
	maxSummaryValue = 64
)

// Op is a matcher's operator.
type Op string

// The operators, spelled as on the wire.
const (
	Equals    Op = "equals"
	NotEquals Op = "not_equals"
	Contains  Op = "contains"
	Matches   Op = "matches"
	Exists    Op = "exists"
	Truthy    Op = "truthy"
	GT        Op = "gt"
	GTE       Op = "gte"
	LT        Op = "lt"
	LTE       Op = "lte"
)

// ops lists the operators in the order refusals name them.
func ops() []Op {
	return []Op{Equals, NotEquals, Contains, Matches, Exists, Truthy, GT, GTE, LT, LTE}
}

// Matcher is one validated matcher. The zero value is not usable: build one
// with Parse or ParseList.
type Matcher struct {
	// Path is the GJSON path the matcher reads.
	Path string
	// Op is the operator.
	Op Op

	value json.RawMessage // the operator's value, normalised
	str   string          // contains
	num   string          // gt, gte, lt, lte: the number in canonical form
	flag  bool            // exists, truthy
	re    *regexp.Regexp  // matches
}

// Parse validates one matcher object. field names it in refusals
// ("done[1]"), which are invalid_predicate errors naming the field at fault
// ("predicate.done[1].matches").
func Parse(raw json.RawMessage, field string) (Matcher, error) {
	members, err := watcher.DecodeObject(raw, field)
	if err != nil {
		return Matcher{}, err
	}
	var m Matcher
	var opRaw json.RawMessage
	for _, key := range sortedKeys(members) {
		val := members[key]
		switch {
		case key == "path":
			if err := json.Unmarshal(val, &m.Path); err != nil {
				return Matcher{}, watcher.InvalidPredicate(watcher.JoinField(field, "path"), "must be a string")
			}
		case slices.Contains(ops(), Op(key)):
			if m.Op != "" {
				return Matcher{}, watcher.InvalidPredicate(field, "has both %q and %q: give exactly one operator", m.Op, key)
			}
			m.Op, opRaw = Op(key), val
		default:
			return Matcher{}, watcher.InvalidPredicate(watcher.JoinField(field, key), "is not a known field (known: path, %s)", opList())
		}
	}
	if _, ok := members["path"]; !ok {
		return Matcher{}, watcher.InvalidPredicate(watcher.JoinField(field, "path"), "is required")
	}
	if err := checkPath(m.Path, watcher.JoinField(field, "path")); err != nil {
		return Matcher{}, err
	}
	if m.Op == "" {
		// A path alone asks for a truthy value, not a present one.
		m.Op, opRaw = Truthy, json.RawMessage("true")
	}
	if err := m.setValue(opRaw, watcher.JoinField(field, string(m.Op))); err != nil {
		return Matcher{}, err
	}
	return m, nil
}

// ParseList validates one matcher object or a JSON list of them, and
// returns the list sorted, without duplicates. field names the list in
// refusals ("done"; its elements are "done[0]", …).
func ParseList(raw json.RawMessage, field string) ([]Matcher, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '{':
		m, err := Parse(raw, field)
		if err != nil {
			return nil, err
		}
		return []Matcher{m}, nil
	case len(raw) > 0 && raw[0] == '[':
	default:
		return nil, watcher.InvalidPredicate(field, "must be a matcher object or a list of them")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, watcher.InvalidPredicate(field, "must be a matcher object or a list of them")
	}
	if len(items) == 0 {
		return nil, watcher.InvalidPredicate(field, "must hold at least one matcher")
	}
	if len(items) > MaxList {
		return nil, watcher.InvalidPredicate(field, "holds %d matchers; at most %d are allowed", len(items), MaxList)
	}
	ms := make([]Matcher, 0, len(items))
	for i, item := range items {
		m, err := Parse(item, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return Sort(ms), nil
}

// Sort returns ms in canonical order (by canonical JSON) without duplicates.
func Sort(ms []Matcher) []Matcher {
	type keyed struct {
		key string
		m   Matcher
	}
	ks := make([]keyed, 0, len(ms))
	for _, m := range ms {
		b, _ := m.MarshalJSON()
		ks = append(ks, keyed{string(b), m})
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return a.key == b.key })
	out := make([]Matcher, len(ks))
	for i, k := range ks {
		out[i] = k.m
	}
	return out
}

func opList() string {
	var names []string
	for _, op := range ops() {
		names = append(names, string(op))
	}
	return strings.Join(names, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func checkPath(p, field string) error {
	switch {
	case p == "":
		return watcher.InvalidPredicate(field, "must not be empty")
	case len(p) > MaxPath:
		return watcher.InvalidPredicate(field, "is longer than %d bytes", MaxPath)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return watcher.InvalidPredicate(field, "holds a control character")
	}
	return nil
}

func (m *Matcher) setValue(raw json.RawMessage, field string) error {
	switch m.Op {
	case Equals, NotEquals:
		if len(raw) > MaxValue {
			return watcher.InvalidPredicate(field, "is longer than %d bytes", MaxValue)
		}
		norm, ok := normalise(raw)
		if !ok {
			return watcher.InvalidPredicate(field, "must be a JSON value")
		}
		m.value = norm
		return nil
	case Contains, Matches:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return watcher.InvalidPredicate(field, "must be a string")
		}
		if s == "" {
			return watcher.InvalidPredicate(field, "must not be empty")
		}
		if m.Op == Contains {
			if len(s) > MaxValue {
				return watcher.InvalidPredicate(field, "is longer than %d bytes", MaxValue)
			}
			m.str = s
		} else {
			if len(s) > MaxPattern {
				return watcher.InvalidPredicate(field, "is longer than %d bytes", MaxPattern)
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return watcher.InvalidPredicate(field, "is not a valid RE2 regular expression: %s", reason(err))
			}
			m.re, m.str = re, s
		}
	case Exists, Truthy:
		if err := json.Unmarshal(raw, &m.flag); err != nil || string(bytes.TrimSpace(raw)) == "null" {
			return watcher.InvalidPredicate(field, "must be true or false")
		}
	case GT, GTE, LT, LTE:
		var f *float64
		if err := json.Unmarshal(raw, &f); err != nil || f == nil || math.IsInf(*f, 0) || math.IsNaN(*f) {
			return watcher.InvalidPredicate(field, "must be a number")
		}
		num, ok := canonicalNumber(string(bytes.TrimSpace(raw)))
		if !ok {
			return watcher.InvalidPredicate(field, "must be a number")
		}
		m.num = num
	}
	b, err := json.Marshal(m.opValue())
	if err != nil {
		return watcher.InvalidPredicate(field, "could not be encoded")
	}
	m.value = b
	return nil
}

// reason returns the part of a regexp error after its "error parsing
// regexp: " prefix.
func reason(err error) string {
	s := err.Error()
	if _, after, ok := strings.Cut(s, "regexp: "); ok {
		return after
	}
	return s
}

func (m *Matcher) opValue() any {
	switch m.Op {
	case Contains, Matches:
		return m.str
	case Exists, Truthy:
		return m.flag
	case GT, GTE, LT, LTE:
		return json.RawMessage(m.num)
	}
	return m.value
}

// normalise re-encodes a JSON value in one spelling: numbers as float64 in
// shortest form (integers beyond 2^53 with every digit), object keys
// sorted, the last of duplicate keys kept, no insignificant space.
func normalise(raw []byte) (json.RawMessage, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	v, ok := canonicalNumbers(v)
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

// canonicalNumbers rewrites every number of v (decoded with UseNumber)
// in its canonical spelling; false when one is out of float64's range.
func canonicalNumbers(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		s, ok := canonicalNumber(string(x))
		return json.Number(s), ok
	case []any:
		for i, e := range x {
			var ok bool
			if x[i], ok = canonicalNumbers(e); !ok {
				return nil, false
			}
		}
	case map[string]any:
		for k, e := range x {
			var ok bool
			if x[k], ok = canonicalNumbers(e); !ok {
				return nil, false
			}
		}
	}
	return v, true
}

// MarshalJSON returns the matcher's canonical JSON.
func (m Matcher) MarshalJSON() ([]byte, error) {
	return watcher.Encode(map[string]json.RawMessage{"path": mustString(m.Path), string(m.Op): m.value})
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// String describes the matcher in words: `status.phase equals "Ready"`.
func (m Matcher) String() string {
	return fmt.Sprintf("%s %s %s", m.Path, strings.ReplaceAll(string(m.Op), "_", " "), m.value)
}

// Result is what one matcher found in a document.
type Result struct {
	// Path is the matcher's path.
	Path string
	// Found reports whether the path is present.
	Found bool
	// Value is the JSON text found at the path, clipped to MaxFactValue.
	Value string
	// Matched reports whether the matcher matched.
	Matched bool
}

// Match applies m to the JSON document doc. A document that is not valid
// JSON matches nothing.
func (m Matcher) Match(doc []byte) Result {
	doc, ok := document(doc)
	if !ok {
		return Result{Path: m.Path}
	}
	return m.match(gjson.GetBytes(doc, m.Path))
}

func (m Matcher) match(r gjson.Result) Result {
	res := Result{Path: m.Path, Found: r.Exists()}
	if res.Found {
		res.Value = watcher.Clip(r.Raw, MaxFactValue)
	}
	switch {
	case m.Op == Exists:
		res.Matched = res.Found == m.flag
	case !res.Found:
		// A missing path matches nothing but exists:false.
	case m.Op == Equals || m.Op == NotEquals:
		norm, ok := normalise([]byte(r.Raw))
		res.Matched = ok && bytes.Equal(norm, m.value) == (m.Op == Equals)
	case m.Op == Contains:
		res.Matched = contains(r, m.str)
	case m.Op == Matches:
		switch r.Type {
		case gjson.String:
			res.Matched = m.re.MatchString(r.Str)
		case gjson.Number, gjson.True, gjson.False:
			res.Matched = m.re.MatchString(r.Raw)
		}
	case m.Op == Truthy:
		res.Matched = truthy(r) == m.flag
	default: // gt, gte, lt, lte
		if r.Type == gjson.Number {
			c, ok := compareNumbers(r.Raw, m.num)
			res.Matched = ok && compare(m.Op, c)
		}
	}
	return res
}

func contains(r gjson.Result, s string) bool {
	if r.Type == gjson.String {
		return strings.Contains(r.Str, s)
	}
	if r.IsArray() {
		for _, e := range r.Array() {
			if e.Type == gjson.String && e.Str == s {
				return true
			}
		}
	}
	return false
}

func truthy(r gjson.Result) bool {
	switch r.Type {
	case gjson.True:
		return true
	case gjson.Number:
		return r.Num != 0
	case gjson.String:
		return r.Str != ""
	case gjson.JSON:
		nonEmpty := false
		r.ForEach(func(_, _ gjson.Result) bool { nonEmpty = true; return false })
		return nonEmpty
	}
	return false // false, null
}

// compare reports whether a comparison that came out c (-1, 0, 1)
// satisfies op.
func compare(op Op, c int) bool {
	switch op {
	case GT:
		return c > 0
	case GTE:
		return c >= 0
	case LT:
		return c < 0
	default:
		return c <= 0
	}
}

// Evaluation is what a list of matchers found in one document.
type Evaluation struct {
	// JSON reports whether the document was valid JSON.
	JSON bool
	// Matched reports whether the document is JSON and every matcher
	// matched; it is false for an empty list.
	Matched bool
	// Results holds one result per matcher, in the list's order.
	Results []Result
}

// Evaluate applies every matcher of ms to the JSON document doc.
func Evaluate(ms []Matcher, doc []byte) Evaluation {
	doc, isJSON := document(doc)
	ev := Evaluation{JSON: isJSON, Matched: len(ms) > 0}
	for _, m := range ms {
		var r Result
		if ev.JSON {
			r = m.match(gjson.GetBytes(doc, m.Path))
		} else {
			r = Result{Path: m.Path}
		}
		ev.Matched = ev.Matched && r.Matched
		ev.Results = append(ev.Results, r)
	}
	return ev
}

// Facts returns the results as observation facts: one object per matcher
// with its path, whether it was found, the value found (clipped) and
// whether it matched. Facts hold only plain JSON values, so an unchanged
// world gives equal facts.
func (e Evaluation) Facts() []any {
	out := make([]any, 0, len(e.Results))
	for _, r := range e.Results {
		f := map[string]any{"path": r.Path, "found": r.Found, "matched": r.Matched}
		if r.Found {
			f["value"] = r.Value
		}
		out = append(out, f)
	}
	return out
}

// Summary describes what the matchers found in one line:
// `status.phase = "Ready"; count missing`, or "not JSON".
func (e Evaluation) Summary() string {
	if !e.JSON {
		return "not JSON"
	}
	parts := make([]string, 0, len(e.Results))
	for _, r := range e.Results {
		if r.Found {
			parts = append(parts, fmt.Sprintf("%s = %s", r.Path, watcher.Clip(r.Value, maxSummaryValue)))
		} else {
			parts = append(parts, r.Path+" missing")
		}
	}
	return strings.Join(parts, "; ")
}
