package mcpserver_test

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/mcpserver"
)

// TestToolsDocumented: the tool table of docs/agents.md lists exactly the
// tools the server has, and the package comment names each of them.
func TestToolsDocumented(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcpserver.New(startEngine(t), nil), nil)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)

	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "_") && (strings.HasPrefix(m[1], "watch_") || strings.HasPrefix(m[1], "inbox_") || strings.HasPrefix(m[1], "note_")) {
			table = append(table, m[1])
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, names) {
		t.Errorf("docs/agents.md's tool table lists %v, want the tools %v", table, names)
	}

	f, err := parser.ParseFile(token.NewFileSet(), "mcpserver.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	pkg := f.Doc.Text()
	for _, n := range names {
		if !regexp.MustCompile(`\b` + n + `\b`).MatchString(pkg) {
			t.Errorf("the package comment does not name the tool %s", n)
		}
	}
}
