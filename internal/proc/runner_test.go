package proc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
)

// TestRunnerStdin checks the exported runner: the program reads stdin,
// a timeout ends it without an error, and a missing program is permanent.
func TestRunnerStdin(t *testing.T) {
	t.Parallel()
	r := proc.Runner{KillGrace: 200 * time.Millisecond}
	ctx := context.Background()
	out, err := r.Run(ctx, proc.Program{Argv: []string{"tr", "a-z", "A-Z"}}, []byte("review me\n"), 5*time.Second)
	if err != nil || out.ExitCode != 0 || out.Stdout != "REVIEW ME\n" {
		t.Fatalf("Run(tr) = %+v, %v; want REVIEW ME and exit 0", out, err)
	}
	out, err = r.Run(ctx, proc.Program{Shell: "cat >/dev/null; echo bad >&2; exit 3"}, []byte(strings.Repeat("x", 1<<20)), 5*time.Second)
	if err != nil || out.ExitCode != 3 || out.Stderr != "bad\n" {
		t.Fatalf("Run(exit 3) = %+v, %v", out, err)
	}
	out, err = r.Run(ctx, proc.Program{Shell: "sleep 30"}, nil, 100*time.Millisecond)
	if err != nil || !strings.Contains(out.Ended, "timed out") {
		t.Fatalf("Run(sleep) = %+v, %v; want a timeout", out, err)
	}
	_, err = r.Run(ctx, proc.Program{Argv: []string{"no-such-program-vigil"}}, nil, time.Second)
	if !watcher.IsPermanent(err) {
		t.Fatalf("Run(missing) err = %v, want permanent", err)
	}
}

func TestProgramCheckNamesPrefixedFields(t *testing.T) {
	t.Parallel()
	p := proc.Program{Argv: []string{"./review.sh"}}
	err := p.Check("on_change")
	if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || !strings.Contains(err.Error(), "predicate.on_change.argv[0]") {
		t.Fatalf("Check = %v, want invalid_predicate on predicate.on_change.argv[0]", err)
	}
	p = proc.Program{Shell: "x", Cwd: "/tmp/../tmp/"}
	if err := p.Check("on_change"); err != nil || p.Cwd != "/tmp" {
		t.Fatalf("Check = %v, cwd %q; want ok and /tmp", err, p.Cwd)
	}
}

// TestSignalsAreNamed: a program killed by a signal is said to be, by
// the signal's name, whichever signal it is: a floating point exception
// or a CPU limit was worded by its description ("killed by signal
// floating point exception"), unlike SIGKILL or SIGTERM.
func TestSignalsAreNamed(t *testing.T) {
	t.Parallel()
	r := proc.Runner{KillGrace: 200 * time.Millisecond}
	for _, sig := range []string{"KILL", "TERM", "FPE", "QUIT", "USR1", "XCPU", "BUS"} {
		out, err := r.Run(context.Background(), proc.Program{Shell: "kill -" + sig + " $$"}, nil, 5*time.Second)
		if want := "killed by signal SIG" + sig; err != nil || out.Ended != want {
			t.Errorf("Run(kill -%s $$) = %+v, %v; want %q", sig, out, err, want)
		}
	}
}
