package kinds_test

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
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
		if d.Doc == "" || len(d.Schema) == 0 || d.Subject == nil || d.CLI.Build == nil || d.CLI.Use == "" || d.CLI.Short == "" {
			t.Errorf("kind %s: incomplete descriptor (doc %q, schema %d bytes, subject %v, CLI %q)", k, d.Doc, len(d.Schema), d.Subject != nil, d.CLI.Use)
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
