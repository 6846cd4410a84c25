package file_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/file"
)

func canon(t *testing.T, w *file.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func probe(t *testing.T, w *file.Watcher, pred json.RawMessage) vigil.Observation {
	t.Helper()
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindFile, Predicate: pred})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	obs.At = time.Time{}
	return obs
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready.log")
	write(t, ready, "booting\nlistening on :8080\n")
	missing := filepath.Join(dir, "missing")
	big := filepath.Join(dir, "big.log")
	write(t, big, "MARKER-AT-START\n"+strings.Repeat("x", 100)+"\ntail-marker\n")

	w := file.New(file.Config{})
	tests := []struct {
		name        string
		pred        string
		wantVerdict vigil.Verdict
		wantSummary string
	}{
		{"exists", `{"path":` + q(ready) + `}`, vigil.VerdictSatisfied, ready + " exists"},
		{"not yet", `{"path":` + q(missing) + `}`, vigil.VerdictPending, missing + " does not exist yet"},
		{"absent wanted", `{"path":` + q(missing) + `,"exists":false}`, vigil.VerdictSatisfied, missing + " does not exist"},
		{"absent wanted, still there", `{"path":` + q(ready) + `,"exists":false}`, vigil.VerdictPending, ready + " still exists"},
		{"under a file is absent", `{"path":` + q(ready+"/x") + `,"exists":false}`, vigil.VerdictSatisfied, ready + "/x does not exist"},
		{"contains", `{"path":` + q(ready) + `,"contains":"listening on"}`, vigil.VerdictSatisfied, ready + ` contains "listening on"`},
		{"does not contain", `{"path":` + q(ready) + `,"contains":"stopped"}`, vigil.VerdictPending, ready + ` exists but does not yet contain "stopped"`},
		{"matches", `{"path":` + q(ready) + `,"matches":"listening on :\\d+"}`, vigil.VerdictSatisfied, ready + ` matches /listening on :\d+/`},
		{"does not match", `{"path":` + q(ready) + `,"matches":"^stopped"}`, vigil.VerdictPending, ready + ` exists but does not yet match /^stopped/`},
		{"contains on a missing file", `{"path":` + q(missing) + `,"contains":"x"}`, vigil.VerdictPending, missing + " does not exist yet"},
		{"directory cannot contain", `{"path":` + q(dir) + `,"contains":"x"}`, vigil.VerdictPending, dir + ` exists but is not a regular file, so it cannot contain "x"`},
		{"large file searched at its end", `{"path":` + q(big) + `,"contains":"tail-marker","max_bytes":20}`, vigil.VerdictSatisfied, big + ` contains "tail-marker"`},
		{"large file not at its start", `{"path":` + q(big) + `,"contains":"MARKER-AT-START","max_bytes":20}`, vigil.VerdictPending, big + ` exists but does not yet contain "MARKER-AT-START"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probe(t, w, canon(t, w, tt.pred))
			if got.Verdict != tt.wantVerdict || got.Summary != tt.wantSummary {
				t.Errorf("Probe(%s) = %s %q, want %s %q (%+v)", tt.pred, got.Verdict, got.Summary, tt.wantVerdict, tt.wantSummary, got)
			}
		})
	}
}

func TestProbeFactsAreStable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "a.log")
	write(t, path, "one\n")
	w := file.New(file.Config{})
	pred := canon(t, w, `{"path":`+q(path)+`,"contains":"two"}`)
	first := probe(t, w, pred)
	write(t, path, "one\nthree\n") // grows, still without "two"
	second := probe(t, w, pred)
	if !first.Same(&second) {
		t.Errorf("observations differ for an unchanged answer:\n%+v\n%+v", first, second)
	}
	want := map[string]any{"path": path, "exists": true, "matched": false}
	if diff := cmp.Diff(want, second.Facts); diff != "" {
		t.Errorf("Facts (-want +got):\n%s", diff)
	}
}

func TestPermissionDeniedIsUnavailable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	write(t, path, "x")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	w := file.New(file.Config{})
	got := probe(t, w, canon(t, w, `{"path":`+q(path)+`,"contains":"x"}`))
	if got.Verdict != vigil.VerdictUnavailable || got.Permanent || !strings.Contains(got.Reason, "permission denied") {
		t.Errorf("Probe(unreadable) = %+v, want transient unavailable: permission denied", got)
	}
}

func TestRoots(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(outside, "secret"), "s3cret")
	write(t, filepath.Join(root, "sub", "ok"), "fine")
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "sub"), filepath.Join(base, "into-root")); err != nil {
		t.Fatal(err)
	}
	w := file.New(file.Config{Roots: []string{root}})
	tests := []struct {
		name  string
		path  string
		admit bool
	}{
		{"inside", filepath.Join(root, "sub", "ok"), true},
		{"the root itself", root, true},
		{"not yet existing, inside", filepath.Join(root, "sub", "later", "deeper"), true},
		{"outside", filepath.Join(outside, "secret"), false},
		{"a sibling sharing the root's prefix", root + "-other/x", false},
		{"symlink escaping the root", filepath.Join(root, "escape", "secret"), false},
		{"not yet existing under an escaping symlink", filepath.Join(root, "escape", "later"), false},
		{"dot-dot cleaned away first", filepath.Join(root, "sub") + "/../../outside/secret", false},
		{"symlink from outside into the root", filepath.Join(base, "into-root", "ok"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pred := canon(t, w, `{"path":`+q(tt.path)+`}`)
			err := w.Admit(context.Background(), pred)
			if tt.admit {
				if err != nil {
					t.Errorf("Admit(%s) = %v, want admitted", tt.path, err)
				}
				return
			}
			if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "roots") || !strings.Contains(err.Error(), "VIGIL_ROOTS") {
				t.Errorf("Admit(%s) = %v, want watch_unobservable naming roots and VIGIL_ROOTS", tt.path, err)
			}
			got := probe(t, w, pred)
			if got.Verdict != vigil.VerdictUnavailable || !got.Permanent || !strings.Contains(got.Reason, "outside the allowed roots") {
				t.Errorf("Probe(%s) = %+v, want a permanent refusal", tt.path, got)
			}
		})
	}
}

// TestRootsRecheckedAtProbe plants an escaping symlink after admission: the
// probe must refuse it rather than look outside the root.
func TestRootsRecheckedAtProbe(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(outside, "secret"), "s3cret")
	w := file.New(file.Config{Roots: []string{root}})
	pred := canon(t, w, `{"path":`+q(filepath.Join(root, "link", "secret"))+`,"contains":"s3cret"}`)
	if err := w.Admit(context.Background(), pred); err != nil {
		t.Fatalf("Admit = %v, want admitted while link does not exist", err)
	}
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictPending {
		t.Fatalf("Probe before the symlink = %+v, want pending", got)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	got := probe(t, w, pred)
	if got.Verdict != vigil.VerdictUnavailable || !got.Permanent {
		t.Errorf("Probe after an escaping symlink = %+v, want a permanent refusal", got)
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	w := file.New(file.Config{})
	tests := []struct{ in, want string }{
		{`{"path":"/srv//app/./READY"}`, `{"exists":true,"path":"/srv/app/READY"}`},
		{`{"path":"/srv/app/READY","exists":true,"max_bytes":10}`, `{"exists":true,"path":"/srv/app/READY"}`},
		{`{"path":"/a/b/../c","exists":false}`, `{"exists":false,"path":"/a/c"}`},
		{`{"path":"/a","contains":"x"}`, `{"contains":"x","exists":true,"max_bytes":1048576,"path":"/a"}`},
		{`{"path":"/a","matches":"^x$","max_bytes":5}`, `{"exists":true,"matches":"^x$","max_bytes":5,"path":"/a"}`},
	}
	for _, tt := range tests {
		if got := canon(t, w, tt.in); string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	w := file.New(file.Config{})
	tests := []struct{ in, field string }{
		{`{}`, "predicate.path"},
		{`{"path":"relative/x"}`, "predicate.path"},
		{`{"path":"/a","contains":"x","matches":"y"}`, "predicate"},
		{`{"path":"/a","exists":false,"contains":"x"}`, "predicate.exists"},
		{`{"path":"/a","matches":"(x"}`, "predicate.matches"},
		{`{"path":"/a","max_bytes":0}`, "predicate.max_bytes"},
		{`{"path":"/a","max_bytes":16777217}`, "predicate.max_bytes"},
		{`{"path":"/a","glob":"*"}`, "predicate.glob"},
	}
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field {
			t.Errorf("Canonicalize(%s) = %v (field %q), want invalid_predicate on %s", tt.in, err, vigil.ErrorField(err), tt.field)
		}
	}
}
