package watcher

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/vigil-run/vigil"
)

// Descriptor is everything vigil knows about a kind besides its watcher:
// its defaults, the JSON Schema of its predicate, how to say its subject in
// words and its command-line form. Each kind package exports its own
// (Descriptor(), in its kind.go); watcher/kinds lists the built-in ones,
// and the daemon, the MCP server, the OpenAPI document, wording and the
// CLI all read them from there, so a kind is said in one place.
type Descriptor struct {
	Kind vigil.Kind
	// Spec holds the kind's defaults (SPEC §2). Spec.Exec says the kind
	// runs commands: registering it needs exec allowed and, for a scoped
	// token, the exec scope.
	Spec vigil.KindSpec
	// DueOnly says a watch of this kind can settle only when it is due (at
	// a check, or at its deadline) — never by an event from outside, like a
	// token's completion URL or a change to a watched folder — so a wait
	// that ends before its next check can answer at once.
	DueOnly bool
	// Doc is the predicate's shape for a model, by example, one line: the
	// MCP tool description lists it after the kind's name.
	Doc string
	// Schema is the JSON Schema (2020-12) of the predicate as a caller
	// sends it. It must accept every predicate the watcher's Canonicalize
	// accepts; a key it does not list is refused, as Decode refuses it.
	Schema json.RawMessage
	// Subject says what a watch of this kind watches, in a few words ("GET
	// https://x/health"), from its predicate with credentials redacted
	// (decoded as JSON: numbers are float64). Nil says "KIND watch ID".
	Subject func(p map[string]any) string
	// CLI is the kind's form under "vigil add"; the zero value means the
	// kind takes its predicate as --predicate JSON only.
	CLI CLI
	// New builds the kind's watcher from what the daemon shares: the
	// daemon registers every built-in kind by calling it, so a kind needs
	// no line of its own there. A watcher that is an io.Closer is closed
	// with the daemon; one that is a Runner runs alongside it.
	New func(Deps) Watcher
}

// CLI is a kind's command-line form: "vigil add KIND" is built from it,
// so the CLI learns a kind from its descriptor.
type CLI struct {
	// Use is the usage line ("http URL"); Short and Long are its help.
	Use, Short, Long string
	// Examples are whole command lines ("vigil add tcp localhost:5432").
	Examples []string
	// MaxArgs bounds the positional arguments; -1 means any number.
	MaxArgs int
	// Flags are the kind's own flags.
	Flags []Flag
	// Build sets the predicate's fields from the arguments and flags, on
	// top of what --predicate gave. Its errors are usage errors, said to
	// the person at the terminal.
	Build func(p map[string]any, in CLIInput) error
}

// CLIInput is what a kind's CLI form builds its predicate from.
type CLIInput struct {
	// Args are the positional arguments; Dash is the index in Args of
	// the first one given after "--", -1 when there is none.
	Args []string
	Dash int
	// Flags are the values of the kind's flags.
	Flags Flags
}

// FlagType is the type of a CLI flag's value.
type FlagType int

// The types of CLI flags.
const (
	FlagString      FlagType = iota // a string
	FlagBool                        // a boolean
	FlagInt                         // a whole number
	FlagStringSlice                 // strings, repeatable and comma-separated
	FlagStringArray                 // strings, repeatable, each taken whole
	FlagIntSlice                    // whole numbers, repeatable and comma-separated
)

// Flag is one flag of a kind's CLI form.
type Flag struct {
	Name  string
	Type  FlagType
	Usage string
	// Default is the default of a FlagInt (an int) or FlagString (a
	// string) flag, shown in the help; nil for the zero value.
	Default any
}

// Flags are the values of a kind's flags as given on the command line; a
// flag not given has its default.
type Flags interface {
	// Changed reports whether the flag was given.
	Changed(name string) bool
	String(name string) string
	Bool(name string) bool
	Int(name string) int
	// Strings is the value of a FlagStringSlice or FlagStringArray flag.
	Strings(name string) []string
	Ints(name string) []int
}

// PredicateSchema returns the JSON Schema of T, a kind's input struct, as
// jsonschema-go infers it (a json.RawMessage field is any JSON value),
// with descs as the descriptions of its properties. It panics on a type
// it cannot describe: a bug in the kind's package, found by its tests.
func PredicateSchema[T any](descs map[string]string) json.RawMessage {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): {}},
	})
	if err != nil {
		panic(fmt.Sprintf("watcher: schema of %T: %v", *new(T), err))
	}
	for name, d := range descs {
		p, ok := s.Properties[name]
		if !ok {
			panic(fmt.Sprintf("watcher: schema of %T has no property %q", *new(T), name))
		}
		p.Description = d
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("watcher: schema of %T: %v", *new(T), err))
	}
	return b
}

// Kinds is a set of kind descriptors: watcher/kinds.Builtin() is the one
// of this vigil. It is read-only once built.
type Kinds struct {
	list    []Descriptor // sorted by kind
	schemas map[vigil.Kind]kindSchema
}

// NewKinds returns the set of ds; it panics on a duplicate or unnamed
// kind or a predicate schema that does not resolve: a wiring bug.
func NewKinds(ds ...Descriptor) Kinds {
	list := slices.Clone(ds)
	schemas := make(map[vigil.Kind]kindSchema, len(ds))
	slices.SortFunc(list, func(a, b Descriptor) int { return strings.Compare(string(a.Kind), string(b.Kind)) })
	for i, d := range list {
		if d.Kind == "" {
			panic("watcher: a descriptor without a kind")
		}
		if i > 0 && list[i-1].Kind == d.Kind {
			panic(fmt.Sprintf("watcher: kind %q described twice", d.Kind))
		}
		s, err := resolveSchema(d)
		if err != nil {
			panic(err.Error())
		}
		schemas[d.Kind] = s
	}
	return Kinds{list: list, schemas: schemas}
}

// with returns ks and d, a kind not in ks (resolving d's schema alone).
func (ks Kinds) with(d Descriptor) Kinds {
	if _, dup := ks.Lookup(d.Kind); dup || d.Kind == "" {
		panic(fmt.Sprintf("watcher: kind %q described twice or unnamed", d.Kind))
	}
	s, err := resolveSchema(d)
	if err != nil {
		panic(err.Error())
	}
	list := append(slices.Clone(ks.list), d)
	slices.SortFunc(list, func(a, b Descriptor) int { return strings.Compare(string(a.Kind), string(b.Kind)) })
	schemas := maps.Clone(ks.schemas)
	if schemas == nil {
		schemas = make(map[vigil.Kind]kindSchema)
	}
	schemas[d.Kind] = s
	return Kinds{list: list, schemas: schemas}
}

// Lookup returns the descriptor of k.
func (ks Kinds) Lookup(k vigil.Kind) (Descriptor, bool) {
	i, ok := slices.BinarySearchFunc(ks.list, k, func(d Descriptor, k vigil.Kind) int { return strings.Compare(string(d.Kind), string(k)) })
	if !ok {
		return Descriptor{}, false
	}
	return ks.list[i], true
}

// Spec returns the defaults of k, and false for a kind not in the set.
func (ks Kinds) Spec(k vigil.Kind) (vigil.KindSpec, bool) {
	d, ok := ks.Lookup(k)
	return d.Spec, ok
}

// Len is how many kinds the set holds.
func (ks Kinds) Len() int { return len(ks.list) }

// List returns the descriptors, sorted by kind.
func (ks Kinds) List() []Descriptor { return slices.Clone(ks.list) }

// Names returns the kinds, sorted.
func (ks Kinds) Names() []vigil.Kind {
	out := make([]vigil.Kind, len(ks.list))
	for i, d := range ks.list {
		out[i] = d.Kind
	}
	return out
}

// RequestOneOf returns the branches of a registration's oneOf, one per
// kind: {"properties": {"kind": {"const": K}, "predicate": SCHEMA},
// "required": ["kind"]}. The MCP tool watch_create and the OpenAPI
// document's RegisterRequest both declare it, so both say each kind's
// predicate as its descriptor does.
func (ks Kinds) RequestOneOf() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(ks.list))
	for _, d := range ks.list {
		schema := d.Schema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		kind, _ := json.Marshal(string(d.Kind))
		out = append(out, json.RawMessage(`{"properties":{"kind":{"const":`+string(kind)+`},"predicate":`+string(schema)+`},"required":["kind"]}`))
	}
	return out
}

// SubjectString returns p[key] when it is a string, else "": the helper of
// the descriptors' Subject functions.
func SubjectString(p map[string]any, key string) string {
	s, _ := p[key].(string)
	return s
}

// ProgramSubject says the program of a predicate that runs one (argv or
// shell): "the command `make test`", clipped to a few words.
func ProgramSubject(p map[string]any) string {
	if sh := SubjectString(p, "shell"); sh != "" {
		return "the command `" + clipWords(sh, 80) + "`"
	}
	if argv, ok := p["argv"].([]any); ok {
		parts := make([]string, 0, len(argv))
		for _, a := range argv {
			parts = append(parts, fmt.Sprint(a))
		}
		return "the command `" + clipWords(strings.Join(parts, " "), 80) + "`"
	}
	return "the command"
}

// clipWords joins the words of s with single spaces and clips the result
// to n bytes, at a rune boundary, marking the cut with "…".
func clipWords(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
