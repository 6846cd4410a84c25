package folder

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigil-run/vigil/watcher"
)

// review runs the watch's reviewer with the report on stdin and returns
// what it left, for the facts. Whatever happens (a failure, a timeout, a
// program not found, exec turned off since the watch was made), the
// report still goes out and the baseline still moves: the review says
// what went wrong instead.
func (w *Watcher) review(ctx context.Context, p watcher.Probe, s *spec, resolved string, snap *snapshot, report string) map[string]any {
	if !w.allowExec {
		return map[string]any{"error": "the reviewer was not run: exec is not allowed on this daemon (--allow-exec)"}
	}
	prog := s.OnChange.Program
	if prog.Cwd == "" {
		prog.Cwd = resolved
		if snap.single || !snap.exists {
			prog.Cwd, _ = existingParent(resolved)
		}
	}
	env := make(map[string]string, len(prog.Env)+2)
	for k, v := range prog.Env {
		env[k] = v
	}
	env["VIGIL_WATCH_ID"] = p.WatchID
	env["VIGIL_FOLDER"] = s.Path
	prog.Env = env
	out, err := w.runner.Run(ctx, prog, []byte(report), s.reviewTimeout)
	if err != nil {
		return map[string]any{"error": "the reviewer could not run: " + err.Error()}
	}
	r := map[string]any{}
	if o := strings.TrimSpace(out.Stdout); o != "" {
		r["output"] = watcher.ClipTail(o, reviewOutput)
	}
	if out.Ended != "" {
		r["error"] = "the reviewer " + out.Ended
	} else {
		r["exit_code"] = out.ExitCode
	}
	if e := strings.TrimSpace(out.Stderr); e != "" && (out.Ended != "" || out.ExitCode != 0) {
		r["stderr"] = watcher.ClipTail(e, reviewStderr)
	}
	return r
}

// reviewNote words the review for the summary line.
func reviewNote(r map[string]any) string {
	out, _ := r["output"].(string)
	first, _, _ := strings.Cut(out, "\n")
	if e, ok := r["error"].(string); ok {
		return "; " + e
	}
	if code := intFact(r["exit_code"]); code != 0 {
		if first != "" {
			return fmt.Sprintf("; the reviewer exited %d: %s", code, first)
		}
		return fmt.Sprintf("; the reviewer exited %d", code)
	}
	if first == "" {
		return "; the reviewer said nothing"
	}
	return "; review: " + first
}

// existingParent returns the deepest existing folder above path and the
// name of the next step down from it.
func existingParent(path string) (dir, name string) {
	for p := path; ; {
		parent := filepath.Dir(p)
		if parent == p {
			return "", ""
		}
		if info, err := os.Stat(parent); err == nil && info.IsDir() {
			return parent, filepath.Base(p)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", ""
		}
		p = parent
	}
}
