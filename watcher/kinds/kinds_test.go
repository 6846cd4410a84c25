package kinds_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// TestBuiltinComplete: every built-in kind says everything a descriptor
// holds, so the MCP tool, the OpenAPI document, wording and the CLI have
// something to read for each.
func TestBuiltinComplete(t *testing.T) {
	t.Parallel()
	for _, k := range []vigil.Kind{vigil.KindTimer, vigil.KindHTTP, vigil.KindTCP, vigil.KindFile, vigil.KindCommand, vigil.KindRun,
		vigil.KindCI, vigil.KindTicket, vigil.KindFolder, vigil.KindToken, vigil.KindSchedule} {
		if _, ok := kinds.Lookup(k); !ok {
			t.Errorf("kind %s is not built in", k)
		}
	}
	for _, d := range kinds.Builtin().List() {
		k := d.Kind
		if d.Doc == "" || len(d.Schema) == 0 || d.Subject == nil || d.CLI.Build == nil || d.CLI.Use == "" || d.CLI.Short == "" || d.New == nil {
			t.Errorf("kind %s: incomplete descriptor (doc %q, schema %d bytes, subject %v, CLI %q, new %v)", k, d.Doc, len(d.Schema), d.Subject != nil, d.CLI.Use, d.New != nil)
		}
		if !strings.HasPrefix(d.CLI.Use, string(k)) {
			t.Errorf("kind %s: CLI usage %q does not start with the kind", k, d.CLI.Use)
		}
		for _, ex := range d.CLI.Examples {
			if !strings.HasPrefix(ex, "vigil add "+string(k)+" ") && ex != "vigil add "+string(k) {
				t.Errorf("kind %s: example %q is not a vigil add %s line", k, ex, k)
			}
		}
		seen := map[string]bool{}
		for _, f := range d.CLI.Flags {
			if seen[f.Name] {
				t.Errorf("kind %s: flag --%s twice", k, f.Name)
			}
			seen[f.Name] = true
		}
		// A subject never panics on a predicate missing every field.
		_ = d.Subject(map[string]any{})
	}
}

// TestBuild: the registry the daemon builds from the built-in descriptors
// holds one watcher per kind, of that kind, and says the same kinds as
// the list (the daemon registers no kind of its own).
func TestBuild(t *testing.T) {
	t.Parallel()
	reg := watcher.Build(kinds.Builtin(), watcher.Deps{DataDir: t.TempDir()})
	if got, want := reg.Descriptors().Len(), kinds.Builtin().Len(); got != want {
		t.Fatalf("the registry holds %d kinds, the list %d", got, want)
	}
	for _, d := range kinds.Builtin().List() {
		w, ok := reg.Lookup(d.Kind)
		if !ok {
			t.Errorf("kind %s: not registered", d.Kind)
			continue
		}
		if w.Kind() != d.Kind {
			t.Errorf("kind %s: New made a %s watcher", d.Kind, w.Kind())
		}
	}
	if ws := reg.Watchers(); len(ws) != kinds.Builtin().Len() {
		t.Errorf("Watchers: %d, want %d", len(ws), kinds.Builtin().Len())
	}
}

// TestBuildRefusesNoNew: a descriptor without New is a wiring bug, said at
// once rather than as a kind the daemon silently does not run.
func TestBuildRefusesNoNew(t *testing.T) {
	t.Parallel()
	d, _ := kinds.Lookup(vigil.KindTimer)
	d.New = nil
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "no New") {
			t.Errorf("Build with a descriptor without New: recovered %v", r)
		}
	}()
	watcher.Build(watcher.NewKinds(d), watcher.Deps{})
}
