package watcher

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/vigil-run/vigil"
)

// kindSchema is a descriptor's predicate schema, parsed and resolved once.
type kindSchema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

func resolveSchema(d Descriptor) (kindSchema, error) {
	if len(d.Schema) == 0 {
		return kindSchema{}, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(d.Schema, &s); err != nil {
		return kindSchema{}, fmt.Errorf("watcher: the %s predicate schema: %w", d.Kind, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return kindSchema{}, fmt.Errorf("watcher: the %s predicate schema: %w", d.Kind, err)
	}
	return kindSchema{schema: &s, resolved: r}, nil
}

// CheckPredicate checks raw against the predicate schema of kind k, as a
// client that reads the schema would: nil when it holds (or k is not in
// the set, or has no schema: the daemon decides). A refusal is an
// invalid_predicate error whose field is the JSON path at fault
// ("predicate.url", "predicate.done[0].path").
func (ks Kinds) CheckPredicate(k vigil.Kind, raw json.RawMessage) error {
	s, ok := ks.schemas[k]
	if !ok || s.resolved == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return InvalidPredicate("", "is not valid JSON")
	}
	if err := s.resolved.Validate(v); err == nil {
		return nil
	} else if field, msg, found := fault(s.schema, v, ""); found {
		return InvalidPredicate(field, "%s (the %s predicate's schema)", msg, k)
	} else {
		return InvalidPredicate("", "does not match the %s predicate's schema: %s", k, firstLine(err.Error()))
	}
}

// fault walks v along s and returns the first place where v breaks the
// parts of JSON Schema that predicate schemas use (type, enum, properties,
// required, additionalProperties, items), with a sentence about it.
func fault(s *jsonschema.Schema, v any, path string) (field, msg string, found bool) {
	if s == nil {
		return "", "", false
	}
	if s.Not != nil && isEmptySchema(s.Not) {
		return path, "is not allowed here", true
	}
	if types := schemaTypes(s); len(types) > 0 && !slices.Contains(types, jsonType(v)) &&
		!(jsonType(v) == "integer" && slices.Contains(types, "number")) {
		want := types
		if i := slices.Index(want, "null"); i >= 0 && len(want) > 1 {
			want = slices.Delete(slices.Clone(want), i, i+1)
		}
		return path, "must be " + article(strings.Join(want, " or ")) + ", not " + article(jsonType(v)), true
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return equalJSON(e, v) }) {
		return path, fmt.Sprintf("must be one of %v", s.Enum), true
	}
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			sub, ok := s.Properties[name]
			if !ok {
				sub = s.AdditionalProperties
				if sub != nil && sub.Not != nil && isEmptySchema(sub.Not) {
					known := make([]string, 0, len(s.Properties))
					for k := range s.Properties {
						known = append(known, k)
					}
					sort.Strings(known)
					if len(known) == 0 {
						return JoinField(path, name), "is not a known field (this predicate takes none)", true
					}
					return JoinField(path, name), fmt.Sprintf("is not a known field (known: %s)", strings.Join(known, ", ")), true
				}
			}
			if f, m, ok := fault(sub, v[name], JoinField(path, name)); ok {
				return f, m, true
			}
		}
		// A key that does not belong says more than one missing.
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				return JoinField(path, name), "is required", true
			}
		}
	case []any:
		for i, e := range v {
			if f, m, ok := fault(s.Items, e, fmt.Sprintf("%s[%d]", path, i)); ok {
				return f, m, true
			}
		}
	}
	return "", "", false
}

func isEmptySchema(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && (string(b) == "true" || string(b) == "{}")
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func article(t string) string {
	switch {
	case t == "null":
		return t
	case strings.HasPrefix(t, "a") || strings.HasPrefix(t, "i") || strings.HasPrefix(t, "o"):
		return "an " + t
	}
	return "a " + t
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
