package vigil_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// apiSurface is what docs/api.md must name, read from the code itself.
type apiSurface struct {
	routes  []string          // ServeMux patterns: "GET /v1/watches/{id}", "/mcp"
	params  []string          // query parameters the routes take
	codes   map[string]int    // error code -> HTTP status
	headers map[string]string // constant name -> header name
}

// readAPISurface parses the route table of httpapi (Server.table), the
// routes the daemon mounts beside it (Mount and MountPublic with a literal
// pattern), the Code constants of the root package and the header names
// of internal/wire. Parsing, not a list kept by hand: a route or a code
// added to the code is one the test asks the document for.
func readAPISurface(t *testing.T) apiSurface {
	t.Helper()
	s := apiSurface{codes: map[string]int{}, headers: map[string]string{}}

	table := false
	inspect(t, "httpapi/server.go", func(n ast.Node) bool {
		if fd, ok := n.(*ast.FuncDecl); ok {
			table = fd.Name.Name == "table" && fd.Recv != nil
			return table
		}
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok || !table {
			return true
		}
		switch key, _ := kv.Key.(*ast.Ident); {
		case key == nil:
		case key.Name == "pattern":
			s.routes = append(s.routes, literal(t, kv.Value))
		case key.Name == "query":
			for _, e := range kv.Value.(*ast.CompositeLit).Elts {
				s.params = append(s.params, literal(t, e))
			}
		}
		return true
	})
	inspect(t, "daemon/daemon.go", func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Mount" || sel.Sel.Name == "MountPublic") {
			if lit, ok := call.Args[0].(*ast.BasicLit); ok {
				s.routes = append(s.routes, literal(t, lit))
			}
		}
		return true
	})
	inspect(t, "error.go", func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Code" {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "Code") {
				code := literal(t, vs.Values[i])
				if !wire.Known(vigil.Code(code)) {
					t.Errorf("error.go: %s (%q) is not in internal/wire's status table", name.Name, code)
				}
				s.codes[code] = wire.StatusOf(vigil.Code(code))
			}
		}
		return true
	})
	inspect(t, "internal/wire/wire.go", func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "Header") {
				s.headers[name.Name] = literal(t, vs.Values[i])
			}
		}
		return true
	})
	slices.Sort(s.params)
	s.params = slices.Compact(s.params)

	// A guard against a parse that finds nothing (the code moved): the
	// test would pass on any document.
	if len(s.routes) < 25 || len(s.params) < 10 || len(s.codes) < 20 || len(s.headers) < 6 {
		t.Fatalf("found %d routes, %d query parameters, %d codes and %d headers: has the code moved?",
			len(s.routes), len(s.params), len(s.codes), len(s.headers))
	}
	return s
}

func inspect(t *testing.T, path string, f func(ast.Node) bool) {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(af, f)
}

// literal returns the value of a string literal.
func literal(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Fatalf("%T is not a string literal", e)
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apiDocGaps lists what doc, the text of docs/api.md, fails to name: a
// route as `METHOD PATH` (or `PATH` for a route of every method), a query
// parameter and a header in backquotes, and each error code in a table
// row with its status: | `code` | 422 |.
func apiDocGaps(doc string, s apiSurface) []string {
	var gaps []string
	for _, r := range s.routes {
		if !strings.Contains(doc, "`"+r+"`") {
			gaps = append(gaps, fmt.Sprintf("route `%s` is served but not documented", r))
		}
	}
	for _, p := range s.params {
		if !strings.Contains(doc, "`"+p+"`") {
			gaps = append(gaps, fmt.Sprintf("query parameter `%s` is taken but not documented", p))
		}
	}
	for code, status := range s.codes {
		if !strings.Contains(doc, fmt.Sprintf("| `%s` | %d |", code, status)) {
			gaps = append(gaps, fmt.Sprintf("error code `%s` (HTTP %d) has no row | `%s` | %d | in the error table", code, status, code, status))
		}
	}
	for name, h := range s.headers {
		if !strings.Contains(doc, "`"+h+"`") {
			gaps = append(gaps, fmt.Sprintf("header `%s` (wire.%s) is not documented", h, name))
		}
	}
	slices.Sort(gaps)
	return gaps
}

// TestAPIDoc fails when docs/api.md misses a route the API serves, a query
// parameter one takes, a header, or an error code with its status.
func TestAPIDoc(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range apiDocGaps(string(b), readAPISurface(t)) {
		t.Error("docs/api.md: " + g)
	}
}

// TestAPIDocCatchesGaps takes each route, code and header out of a copy of
// docs/api.md and checks that apiDocGaps sees it gone.
func TestAPIDocCatchesGaps(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, s := string(b), readAPISurface(t)
	var cuts []string
	for _, r := range s.routes {
		cuts = append(cuts, "`"+r+"`")
	}
	for code, status := range s.codes {
		cuts = append(cuts, fmt.Sprintf("| `%s` | %d |", code, status))
	}
	for _, h := range s.headers {
		cuts = append(cuts, "`"+h+"`")
	}
	before := len(apiDocGaps(doc, s))
	for _, c := range cuts {
		if got := apiDocGaps(strings.ReplaceAll(doc, c, "(cut)"), s); len(got) <= before {
			t.Errorf("with %s taken out of the document, apiDocGaps saw nothing", c)
		}
	}
}
