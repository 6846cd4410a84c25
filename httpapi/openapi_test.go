package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

// openAPIDoc is the part of the OpenAPI document the tests read.
type openAPIDoc struct {
	OpenAPI string                                 `json:"openapi"`
	Paths   map[string]map[string]openAPIOperation `json:"paths"`
	Comps   struct {
		Parameters map[string]openAPIParam `json:"parameters"`
		Schemas    map[string]struct {
			Properties map[string]struct {
				Properties map[string]struct {
					Enum []vigil.Code `json:"enum"`
				} `json:"properties"`
			} `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string          `json:"operationId"`
	Parameters  []openAPIParam  `json:"parameters"`
	Security    *[]any          `json:"security"`
	Responses   map[string]any  `json:"responses"`
	RequestBody json.RawMessage `json:"requestBody"`
}

type openAPIParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	return doc
}

// params returns the names of an operation's parameters that are in where.
func (d openAPIDoc) params(op openAPIOperation, where string) []string {
	var names []string
	for _, p := range op.Parameters {
		if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
			p = d.Comps.Parameters[name]
		}
		if p.In == where {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

var wildcard = regexp.MustCompile(`\{([a-z_]+)\}`)

// TestOpenAPIMatchesRoutes checks every route is documented, with its
// path and query parameters and whether it needs a token, and that the
// document describes no route the server lacks.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	s := New(Options{})
	served := map[string]bool{}
	for _, rt := range s.routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		key := strings.ToLower(method) + " " + path
		served[key] = true
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("route %q is not in openapi.json", rt.pattern)
			continue
		}
		var wantPath []string
		for _, m := range wildcard.FindAllStringSubmatch(path, -1) {
			wantPath = append(wantPath, m[1])
		}
		slices.Sort(wantPath)
		if diff := cmp.Diff(wantPath, doc.params(op, "path")); diff != "" {
			t.Errorf("%s: path parameters (-served +documented):\n%s", rt.pattern, diff)
		}
		wantQuery := slices.Sorted(slices.Values(rt.query))
		if diff := cmp.Diff(wantQuery, doc.params(op, "query")); diff != "" {
			t.Errorf("%s: query parameters (-served +documented):\n%s", rt.pattern, diff)
		}
		if public := op.Security != nil && len(*op.Security) == 0; public != rt.public {
			t.Errorf("%s: documented public = %v, served public = %v", rt.pattern, public, rt.public)
		}
		if op.OperationID == "" || len(op.Responses) == 0 {
			t.Errorf("%s: no operationId or responses documented", rt.pattern)
		}
		if (method == http.MethodPost && rt.pattern != "POST /v1/watches/{id}/cancel" && rt.pattern != "POST /v1/watches/{id}/check" && rt.pattern != "POST /v1/recipients/{recipient}/close" &&
			rt.pattern != "POST /v1/tokens/{id}/revoke") != (op.RequestBody != nil) {
			t.Errorf("%s: request body documented = %v", rt.pattern, op.RequestBody != nil)
		}
	}
	// Routes the daemon mounts on the server (Mount): documented here,
	// tried against a running daemon by its tenant matrix
	// (daemon.checkEveryRouteTried).
	for _, key := range []string{"get /v1/daemon"} {
		served[key] = true
		method, path, _ := strings.Cut(key, " ")
		if _, ok := doc.Paths[path][method]; !ok {
			t.Errorf("route %q, which the daemon mounts, is not in openapi.json", key)
		}
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if !served[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not served", strings.ToUpper(method), path)
			}
			// A parameter the comparisons above cannot see (a $ref to
			// no component, a misspelt "in") would pass them unseen.
			for _, p := range op.Parameters {
				if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
					p = doc.Comps.Parameters[name]
				}
				if p.Name == "" || !slices.Contains([]string{"path", "query", "header", "cookie"}, p.In) {
					t.Errorf("%s %s: parameter %+v has no name or no known place (in)", strings.ToUpper(method), path, p)
				}
			}
		}
	}
	if len(s.routes) == 0 || len(doc.Paths) == 0 {
		t.Fatalf("%d routes served, %d paths documented: nothing compared", len(s.routes), len(doc.Paths))
	}
}

// TestOpenAPIErrorCodes checks the documented codes are the table's.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	got := doc.Comps.Schemas["Error"].Properties["error"].Properties["code"].Enum
	if diff := cmp.Diff(Codes(), got); diff != "" {
		t.Errorf("error codes (-table +openapi.json):\n%s", diff)
	}
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code vigil.Code
		want int
	}{
		{vigil.CodeInvalidRequest, 422},
		{vigil.CodeUnknownKind, 422},
		{vigil.CodeInvalidPredicate, 422},
		{vigil.CodeWatchUnobservable, 422},
		{vigil.CodeDeadlineOutOfRange, 422},
		{vigil.CodeIntervalTooSmall, 422},
		{vigil.CodeQuotaExceeded, 429},
		{vigil.CodeChainTooDeep, 422},
		{vigil.CodeUnauthorized, 401},
		{vigil.CodeForbidden, 403},
		{vigil.CodeNotFound, 404},
		{vigil.CodeMethodNotAllowed, 405},
		{vigil.CodeIdempotencyConflict, 409},
		{vigil.CodeConflict, 409},
		{vigil.CodePayloadTooLarge, 413},
		{vigil.CodeUnsupportedMedia, 415},
		{vigil.CodeRateLimited, 429},
		{vigil.CodeUnavailable, 503},
		{vigil.CodeInternal, 500},
		{vigil.CodeStorageFull, 507},
		{"", 500},
		{"not_a_code", 500},
	}
	for _, tt := range tests {
		if got := StatusOf(tt.code); got != tt.want {
			t.Errorf("StatusOf(%q) = %d, want %d", tt.code, got, tt.want)
		}
	}
	if got, want := len(Codes()), len(tests)-2; got != want {
		t.Errorf("len(Codes()) = %d, want %d: a code was added without a test row", got, want)
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{time.Minute: "60s", 1500 * time.Millisecond: "1.5s", 0: "0s", 2 * time.Hour: "7200s"} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// errorCodePath is where the document describes the error codes: the code
// property of the Error schema.
var errorCodePath = []string{"components", "schemas", "Error", "properties", "error", "properties", "code"}

// TestOpenAPIErrorStatuses checks that the document gives every code the
// status the table answers with, both in the machine-readable x-status
// map and in the sentence a reader sees. go test -update rewrites that
// part of openapi.json from the table.
func TestOpenAPIErrorStatuses(t *testing.T) {
	t.Parallel()
	want := errorCodeSchema()
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		doc, err := replaceJSONValue(openAPI, errorCodePath, want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("openapi.json", doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var doc struct {
		Comps struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Properties map[string]struct {
						Enum        []vigil.Code       `json:"enum"`
						Status      map[vigil.Code]int `json:"x-status"`
						Description string             `json:"description"`
					} `json:"properties"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Comps.Schemas["Error"].Properties["error"].Properties["code"]
	statuses := map[int]bool{}
	for _, code := range Codes() {
		statuses[StatusOf(code)] = true
		if got.Status[code] != StatusOf(code) {
			t.Errorf("openapi.json x-status of %s = %d, the server answers %d", code, got.Status[code], StatusOf(code))
		}
	}
	for code := range got.Status {
		if !known(code) {
			t.Errorf("openapi.json x-status lists %s, which the server never answers", code)
		}
	}
	if got.Description != statusSentence() {
		t.Errorf("openapi.json code description = %q, want %q (go test -update rewrites it)", got.Description, statusSentence())
	}
	// An operation that lists an error status must list one a code has.
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for st, resp := range op.Responses {
				n, err := strconv.Atoi(st)
				if err != nil || n < 400 || !strings.Contains(string(resp), "#/components/responses/Error") {
					continue
				}
				if !statuses[n] {
					t.Errorf("%s %s documents error status %d, which no code has", strings.ToUpper(method), path, n)
				}
			}
		}
	}
}

// errorCodeSchema is the code property of the Error schema, from the
// table: the codes, their statuses, and a sentence with both.
func errorCodeSchema() json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"type":"string","enum":[`)
	for i, c := range Codes() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", c)
	}
	b.WriteString(`],"x-status":{`)
	for i, c := range Codes() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", c, StatusOf(c))
	}
	desc, _ := json.Marshal(statusSentence())
	fmt.Fprintf(&b, `},"description":%s}`, desc)
	return json.RawMessage(b.String())
}

// statusSentence says which status each code is answered with, codes
// grouped by status in table order.
func statusSentence() string {
	var order []int
	byStatus := map[int][]string{}
	for _, c := range Codes() {
		st := StatusOf(c)
		if byStatus[st] == nil {
			order = append(order, st)
		}
		byStatus[st] = append(byStatus[st], string(c))
	}
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = fmt.Sprintf("%s %d", strings.Join(byStatus[st], ", "), st)
	}
	return "Stable machine code. HTTP status by code (also in x-status): " + strings.Join(parts, "; ") + "."
}

// replaceJSONValue returns doc with the value at path (object keys)
// replaced by v, indented like its surroundings; the rest of doc is left
// byte for byte.
func replaceJSONValue(doc []byte, path []string, v json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func(depth int) (start, end int, err error)
	walk = func(depth int) (int, int, error) {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("openapi.json: %s is not an object", strings.Join(path[:depth], "."))
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			if tok == path[depth] {
				if depth == len(path)-1 {
					var raw json.RawMessage
					if err := dec.Decode(&raw); err != nil {
						return 0, 0, err
					}
					end := int(dec.InputOffset())
					return end - len(raw), end, nil
				}
				return walk(depth + 1)
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, err
			}
		}
		return 0, 0, fmt.Errorf("openapi.json has no %s", strings.Join(path[:depth+1], "."))
	}
	start, end, err := walk(0)
	if err != nil {
		return nil, err
	}
	lineStart := bytes.LastIndexByte(doc[:start], '\n') + 1
	indent := doc[lineStart : lineStart+len(doc[lineStart:start])-len(bytes.TrimLeft(doc[lineStart:start], " "))]
	var out bytes.Buffer
	if err := json.Indent(&out, v, string(indent), "  "); err != nil {
		return nil, err
	}
	return slices.Concat(doc[:start], out.Bytes(), doc[end:]), nil
}

// TestOpenAPIBatch checks the batch route's documented bound and statuses
// are the ones served.
func TestOpenAPIBatch(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				BatchRequest struct {
					Properties struct {
						Watches struct {
							MaxItems int `json:"maxItems"`
							MinItems int `json:"minItems"`
						} `json:"watches"`
					} `json:"properties"`
				} `json:"BatchRequest"`
				BatchItem struct {
					Properties struct {
						Status struct {
							Enum []string `json:"enum"`
						} `json:"status"`
					} `json:"properties"`
				} `json:"BatchItem"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	w := doc.Components.Schemas.BatchRequest.Properties.Watches
	if w.MinItems != 1 || w.MaxItems != vigil.MaxBatch {
		t.Errorf("documented watches: %d to %d items, want 1 to %d", w.MinItems, w.MaxItems, vigil.MaxBatch)
	}
	want := []string{vigil.BatchCreated, vigil.BatchExisting, vigil.BatchRefused}
	if diff := cmp.Diff(want, doc.Components.Schemas.BatchItem.Properties.Status.Enum); diff != "" {
		t.Errorf("documented statuses (-served +documented):\n%s", diff)
	}
}

// TestOpenAPIDeliver: the documented delivery options are the ones the
// daemon takes (deliver.Options and deliver.ResumeOptions, by their JSON
// names), with the resume adapters and outcome classes it knows.
func TestOpenAPIDeliver(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Ref  string   `json:"$ref"`
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	if ref := schemas["RegisterRequest"].Properties["deliver"].Ref; ref != "#/components/schemas/Deliver" {
		t.Errorf("RegisterRequest.deliver refers to %q, want the Deliver schema", ref)
	}
	for name, v := range map[string]any{"Deliver": deliver.Options{}, "Resume": deliver.ResumeOptions{}} {
		var want []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			want = append(want, tag)
		}
		slices.Sort(want)
		got := slices.Sorted(maps.Keys(schemas[name].Properties))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s schema properties (-daemon +documented):\n%s", name, diff)
		}
	}
	if got := schemas["Resume"].Properties["harness"].Enum; !slices.Equal(got, []string{deliver.HarnessClaude, deliver.HarnessCodex}) {
		t.Errorf("Resume.harness enum = %q", got)
	}
	if got := schemas["Resume"].Properties["on"].Enum; !slices.Equal(got, []string{deliver.OnAny, deliver.OnDone, deliver.OnFail}) {
		t.Errorf("Resume.on enum = %q", got)
	}
}
