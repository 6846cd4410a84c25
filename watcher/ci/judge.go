package ci

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher"
)

// Judge turns the checks of a commit into an observation (see the package
// comment for the rules). required, when not empty, names the checks that
// decide; stall is how long a waiting check may go without an update
// before it is reported as a ghost; now is the probe's time. Judge is
// pure: the same checks at the same time give the same observation, so an
// unchanged commit writes nothing.
func Judge(checks []forge.Check, required []string, stall time.Duration, now time.Time) vigil.Observation {
	deciding := checks
	var missing []string
	other := 0
	if len(required) > 0 {
		byName := make(map[string]forge.Check, len(checks))
		for _, c := range checks {
			byName[c.Name] = c
		}
		deciding = nil
		for _, name := range required {
			if c, ok := byName[name]; ok {
				deciding = append(deciding, c)
			} else {
				missing = append(missing, name)
			}
		}
		other = len(checks) - len(deciding)
	}
	var passed, failed, running, queued, stalled []forge.Check
	for _, c := range deciding {
		switch c.State {
		case forge.StatePassed:
			passed = append(passed, c)
		case forge.StateFailed:
			failed = append(failed, c)
		case forge.StateRunning:
			running = append(running, c)
		default:
			queued = append(queued, c)
		}
		if !c.State.Done() && !c.Updated.IsZero() && now.Sub(c.Updated) > stall {
			stalled = append(stalled, c)
		}
	}

	facts := map[string]any{
		"checks": len(deciding) + len(missing), "passed": len(passed), "failed": len(failed),
		"running": len(running), "queued": len(queued),
	}
	if len(required) > 0 {
		facts["required"] = required
		facts["other_checks"] = other
	}
	if len(failed) > 0 {
		var fs []any
		for _, c := range failed[:min(len(failed), maxFactChecks)] {
			fs = append(fs, map[string]any{"name": c.Name, "result": c.Result, "url": c.URL})
		}
		facts["failed_checks"] = fs
	}
	if len(running) > 0 {
		facts["running_checks"] = nameList(running)
	}
	if len(queued) > 0 {
		facts["queued_checks"] = nameList(queued)
	}
	if len(missing) > 0 {
		facts["missing"] = missing
	}
	if len(stalled) > 0 {
		var ss []any
		for _, c := range stalled[:min(len(stalled), maxFactChecks)] {
			ss = append(ss, map[string]any{"name": c.Name, "state": string(c.State), "since": vigil.FormatTime(c.Updated)})
		}
		facts["stalled"] = ss
	}

	noun := "checks"
	if len(required) > 0 {
		noun = "required checks"
	}
	total := len(deciding) + len(missing)
	var verdict vigil.Verdict
	var summary string
	switch {
	case len(checks) == 0:
		verdict, summary = vigil.VerdictPending, "no checks have appeared yet"
		if len(required) > 0 {
			summary += " (waiting for " + list(missing) + ")"
		}
	case len(running)+len(queued) > 0 || len(failed) == 0 && len(missing) > 0:
		verdict = vigil.VerdictPending
		summary = counts(total, noun, passed, failed, running, queued, missing)
	case len(failed) > 0:
		verdict = vigil.VerdictFailed
		var parts []string
		for _, c := range failed[:min(len(failed), maxFailedListed)] {
			parts = append(parts, failedCheck(c))
		}
		if n := len(failed) - maxFailedListed; n > 0 {
			parts = append(parts, fmt.Sprintf("and %d more", n))
		}
		summary = fmt.Sprintf("%d of %d %s failed: %s", len(failed), total, noun, strings.Join(parts, ", "))
	default:
		verdict = vigil.VerdictSatisfied
		summary = fmt.Sprintf("all %d %s passed", total, noun)
		if total == 1 {
			summary = fmt.Sprintf("the one %s passed", strings.TrimSuffix(noun, "s"))
		}
	}
	if len(stalled) > 0 {
		summary += fmt.Sprintf("; stalled, no update for over %s: %s", vigil.FormatDuration(stall), names(stalled, maxListed))
	}
	return vigil.Observation{Verdict: verdict, Summary: watcher.Clip(summary, maxSummary), Facts: facts}
}

// counts is the summary of checks not all finished: "3 checks: 2 passed,
// 1 running (build)".
func counts(total int, noun string, passed, failed, running, queued []forge.Check, missing []string) string {
	if total == 1 {
		noun = strings.TrimSuffix(noun, "s")
	}
	var parts []string
	if len(passed) > 0 {
		parts = append(parts, fmt.Sprintf("%d passed", len(passed)))
	}
	for _, g := range []struct {
		word string
		cs   []forge.Check
	}{{"failed", failed}, {"running", running}, {"queued", queued}} {
		if len(g.cs) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(g.cs), g.word, names(g.cs, maxListed)))
		}
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d not yet appeared (%s)", len(missing), list(missing)))
	}
	return fmt.Sprintf("%d %s: %s", total, noun, strings.Join(parts, ", "))
}

// failedCheck names a failed check with its result when it is not plain
// "failure", and its URL: "lint (https://…)", "e2e (timed_out, https://…)".
func failedCheck(c forge.Check) string {
	var in []string
	if c.Result != "" && c.Result != "failure" && c.Result != "failed" {
		in = append(in, c.Result)
	}
	if c.URL != "" {
		in = append(in, c.URL)
	}
	if len(in) == 0 {
		return clipName(c.Name)
	}
	return clipName(c.Name) + " (" + strings.Join(in, ", ") + ")"
}

// names lists at most n check names for a summary.
func names(cs []forge.Check, n int) string { return listN(nameList(cs), n) }

// nameList returns the names of at most maxFactChecks checks, for facts.
func nameList(cs []forge.Check) []string {
	ns := make([]string, 0, min(len(cs), maxFactChecks))
	for _, c := range cs[:min(len(cs), maxFactChecks)] {
		ns = append(ns, c.Name)
	}
	return ns
}

func list(ns []string) string { return listN(ns, maxListed) }

// listN lists at most n names: "a, b, c and 2 more".
func listN(ns []string, n int) string {
	out := make([]string, 0, n+1)
	for _, s := range ns[:min(len(ns), n)] {
		out = append(out, clipName(s))
	}
	s := strings.Join(out, ", ")
	if k := len(ns) - n; k > 0 {
		s += fmt.Sprintf(" and %d more", k)
	}
	return s
}

func clipName(s string) string { return watcher.Clip(s, 60) }
