package vigil_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rules of docs/architecture.md, as a test: each is an arrow
// that must not exist. Test files are not counted (a test may start a real
// daemon); the packages' own files are.
const module = "github.com/vigil-run/vigil"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with")
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,Deps", "./...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// local returns the module's packages among paths, relative to the module
// root ("" is the root package), and the outside ones apart.
func local(paths []string) (mine, outside []string) {
	for _, p := range paths {
		switch {
		case p == module:
			mine = append(mine, "")
		case strings.HasPrefix(p, module+"/"):
			mine = append(mine, strings.TrimPrefix(p, module+"/"))
		default:
			outside = append(outside, p)
		}
	}
	return mine, outside
}

func stdlib(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// under reports whether p is dir or a package below it.
func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// sharedWatcherHelpers are the packages under watcher/ that are not kinds:
// the base package (the Watcher interface, decoding, errors), the JSON
// matchers (command, http), the file system notifier (file, folder) and
// the fakes for tests. Kinds may import them; they import no kind.
var sharedWatcherHelpers = []string{"watcher", "watcher/matcher", "watcher/fsevent"}

// kindRegistries list every kind by design: watcher/kinds (the built-in
// kinds' descriptors) and watcher/watchertest (fakes that borrow a real
// kind's descriptor). They may import kinds; no kind imports them.
var kindRegistries = []string{"watcher/kinds", "watcher/watchertest"}

// isKind reports whether p is a watcher kind's package.
func isKind(p string) bool {
	return strings.HasPrefix(p, "watcher/") && !slices.Contains(sharedWatcherHelpers, p) && !slices.Contains(kindRegistries, p)
}

// serverPackages are what a program that only wants the Go client must
// not compile.
var serverPackages = []string{"httpapi", "engine", "daemon", "scheduler", "store", "mcpserver", "deliver", "watcher", "auth", "metrics", "wording", "forge", "cli"}

// archRules returns every broken arrow, one line each.
func archRules(pkgs map[string]pkg) []string {
	var bad []string
	for name, p := range pkgs {
		mineDeps, outsideDeps := local(p.Deps)
		mineImports, outsideImports := local(p.Imports)
		// The root package imports only the standard library,
		// internal/jsonscan and internal/jsonw, which themselves import
		// only the standard library.
		if name == "" || name == "internal/jsonscan" || name == "internal/jsonw" {
			for _, d := range p.Deps {
				if !stdlib(d) && (name != "" || (d != module+"/internal/jsonscan" && d != module+"/internal/jsonw")) {
					who := cmp.Or(name, "the root package")
					bad = append(bad, who+" imports "+d+": it may import only the standard library"+map[bool]string{true: ", internal/jsonscan and internal/jsonw"}[name == ""])
				}
			}
		}
		// The scheduler decides when: it imports only the root package,
		// the standard library and x/sync, so no delivery, wording, store
		// or watcher.
		if name == "scheduler" {
			for _, d := range mineImports {
				if d != "" {
					bad = append(bad, "scheduler imports "+d+": it may import only the root package, the standard library and x/sync")
				}
			}
			for _, d := range outsideImports {
				if !stdlib(d) && !under(d, "golang.org/x/sync") {
					bad = append(bad, "scheduler imports "+d+": it may import only the root package, the standard library and x/sync")
				}
			}
			for _, d := range mineDeps {
				if under(d, "deliver", "wording", "store", "watcher", "engine") {
					bad = append(bad, "scheduler depends on "+d)
				}
			}
		}
		// A kind is one package: it imports no other kind.
		if isKind(name) || slices.Contains(sharedWatcherHelpers, name) {
			for _, d := range mineDeps {
				if isKind(d) {
					bad = append(bad, name+" depends on the kind "+d+": no kind (nor shared watcher helper) imports a kind")
				}
				if isKind(name) && slices.Contains(kindRegistries, d) {
					bad = append(bad, name+" depends on the registry "+d+": no kind imports the list of kinds")
				}
			}
		}
		// No delivery channel imports a kind.
		if under(name, "deliver") {
			for _, d := range mineDeps {
				if isKind(d) {
					bad = append(bad, name+" depends on the kind "+d+": no delivery channel imports a kind")
				}
			}
		}
		// The Go client compiles no server package.
		if name == "client" {
			for _, d := range mineDeps {
				if under(d, serverPackages...) {
					bad = append(bad, "client depends on the server package "+d)
				}
			}
		}
		// Only the CLI and the commands build a daemon (and the test
		// helper that starts one, itself imported only by tests).
		if slices.Contains(mineImports, "daemon") && !under(name, "cli", "cmd", "internal/daemontest") {
			bad = append(bad, name+" imports daemon: only cli and cmd may")
		}
		for _, helper := range []string{"internal/daemontest", "internal/pgtest", "internal/proc/proctest"} {
			if slices.Contains(mineImports, helper) {
				bad = append(bad, name+" imports "+helper+": only tests may")
			}
		}
		_ = outsideDeps
	}
	slices.Sort(bad)
	return bad
}

// TestImportRules enforces the arrows of docs/architecture.md.
func TestImportRules(t *testing.T) {
	for _, b := range archRules(listPackages(t)) {
		t.Error(b)
	}
}

// TestImportRulesCatchBrokenArrows breaks each arrow in a copy of the real
// graph and checks that the rules see it.
func TestImportRulesCatchBrokenArrows(t *testing.T) {
	real := listPackages(t)
	with := func(name string, imports ...string) map[string]pkg {
		m := make(map[string]pkg, len(real))
		for k, v := range real {
			m[k] = v
		}
		p := m[name]
		path := module
		if name != "" {
			path += "/" + name
		}
		p.ImportPath = path
		for _, i := range imports {
			// A path whose first element has a dot is outside the module.
			full := i
			switch {
			case i == "":
				full = module
			case stdlib(i):
				full = module + "/" + i
			}
			p.Imports = append(slices.Clone(p.Imports), full)
			p.Deps = append(slices.Clone(p.Deps), full)
		}
		m[name] = p
		return m
	}
	for _, c := range []struct {
		name, imports string
	}{
		{"", "github.com/oklog/ulid/v2"},
		{"internal/jsonscan", "github.com/oklog/ulid/v2"},
		{"internal/jsonw", "github.com/oklog/ulid/v2"},
		{"scheduler", "wording"},
		{"scheduler", "deliver"},
		{"scheduler", "watcher"},
		{"scheduler", "store/sqlite"},
		{"watcher/folder", "watcher/command"},
		{"watcher/matcher", "watcher/http"},
		{"deliver/command", "watcher/command"},
		{"client", "httpapi"},
		{"client", "engine"},
		{"mcpserver", "daemon"},
		{"httpapi", "internal/daemontest"},
		{"store/postgres", "internal/pgtest"},
		{"deliver/command", "internal/proc/proctest"},
	} {
		if _, ok := real[c.name]; !ok {
			t.Fatalf("no package %q in the graph", c.name)
		}
		before := len(archRules(real))
		if got := archRules(with(c.name, c.imports)); len(got) <= before {
			t.Errorf("%s importing %s: the rules saw nothing", c.name, c.imports)
		}
	}
}
