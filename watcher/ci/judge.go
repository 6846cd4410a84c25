package ci

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher"
)

// MissingGrace is how long a check named in "checks" may stay missing
// once every other check of the commit has finished: past it, the watch
// fails, naming the checks that do exist.
const MissingGrace = 10 * time.Minute

// maxNamesListed bounds the existing check names a missing check's
// sentence lists.
const maxNamesListed = 20

// Judge turns what the forge shows of a commit's CI into an observation
// (see the package comment for the rules). required, when not empty,
// names the checks that decide; stall is how long a waiting check may go
// without an update before it is reported as a ghost; now is the probe's
// time. Judge is pure: the same report at the same time gives the same
// observation, so an unchanged commit writes nothing.
func Judge(r forge.Report, required []string, stall time.Duration, now time.Time) vigil.Observation {
	checks := r.Checks
	shown := displayNames(checks)
	deciding := make([]int, 0, len(checks))
	var missing []string
	if len(required) == 0 {
		for i := range checks {
			deciding = append(deciding, i)
		}
	} else {
		for _, name := range required {
			found := false
			for i, c := range checks {
				if c.Name == name && c.Source != forge.SourceCheckSuite {
					deciding, found = append(deciding, i), true
				}
			}
			if !found {
				missing = append(missing, name)
			}
		}
	}
	other := len(checks) - len(deciding)
	var passed, failed, manual, running, queued, stalled []int
	for _, i := range deciding {
		c := checks[i]
		switch c.State {
		case forge.StatePassed:
			passed = append(passed, i)
		case forge.StateFailed:
			failed = append(failed, i)
		case forge.StateManual:
			manual = append(manual, i)
		case forge.StateRunning:
			running = append(running, i)
		default:
			queued = append(queued, i)
		}
		if !c.State.Done() && !c.Updated.IsZero() && now.Sub(c.Updated) > stall {
			stalled = append(stalled, i)
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
		facts["failed_checks"] = checkFacts(checks, shown, failed, true)
	}
	if len(manual) > 0 {
		facts["manual"] = len(manual)
		facts["manual_checks"] = checkFacts(checks, shown, manual, false)
	}
	if len(running) > 0 {
		facts["running_checks"] = nameList(shown, running)
	}
	if len(queued) > 0 {
		facts["queued_checks"] = nameList(shown, queued)
	}
	if len(missing) > 0 {
		facts["missing"] = missing
	}
	if len(stalled) > 0 {
		var ss []any
		for _, i := range stalled[:min(len(stalled), maxFactChecks)] {
			c := checks[i]
			ss = append(ss, map[string]any{"name": shown[i], "state": string(c.State), "since": vigil.FormatTime(c.Updated)})
		}
		facts["stalled"] = ss
	}
	if len(r.Ignored) > 0 {
		facts["ignored_suites"] = r.Ignored
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
		summary += uiNameHint(r, missing)
	case len(running)+len(queued) > 0:
		verdict = vigil.VerdictPending
		summary = counts(total, noun, shown, passed, failed, manual, running, queued, missing) + uiNameHint(r, missing)
	case len(failed)+len(manual) > 0:
		verdict = vigil.VerdictFailed
		summary = failedSummary(checks, shown, total, noun, failed, manual)
	case len(missing) > 0:
		done, finished := allFinished(checks)
		switch {
		case done && !finished.IsZero() && now.Sub(finished) >= MissingGrace:
			verdict = vigil.VerdictFailed
			summary = neverAppeared(r, missing)
		case done && !finished.IsZero():
			verdict = vigil.VerdictPending
			summary = counts(total, noun, shown, passed, failed, manual, running, queued, missing) +
				fmt.Sprintf("; every other check has finished: failing at %s unless %s %s", wordTime(finished.Add(MissingGrace)),
					list(missing), plural(len(missing), "appears", "appear")) + uiNameHint(r, missing)
		default:
			verdict = vigil.VerdictPending
			summary = counts(total, noun, shown, passed, failed, manual, running, queued, missing) + uiNameHint(r, missing)
		}
	default:
		verdict = vigil.VerdictSatisfied
		summary = fmt.Sprintf("all %d %s passed", total, noun)
		if total == 1 {
			summary = fmt.Sprintf("the one %s passed", strings.TrimSuffix(noun, "s"))
		}
	}
	if len(stalled) > 0 {
		summary += fmt.Sprintf("; stalled, no update for over %s: %s", vigil.FormatDuration(stall), listN(pick(shown, stalled), maxListed))
	}
	if len(r.Ignored) > 0 {
		summary += fmt.Sprintf("; not waiting for %s: %s queued, and %s added no check run to this commit",
			list(r.Ignored), plural(len(r.Ignored), "its check suite is", "their check suites are"),
			plural(len(r.Ignored), "the app has", "the apps have"))
	}
	return vigil.Observation{Verdict: verdict, Summary: watcher.Clip(summary, maxSummary), Facts: facts}
}

// displayNames names each check for a person: its name, and where
// another check has the same name, its group too ("test [CI]",
// "lint [commit status]").
func displayNames(checks []forge.Check) []string {
	count := make(map[string]int, len(checks))
	for _, c := range checks {
		count[c.Name]++
	}
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.Name
		if count[c.Name] > 1 && c.Group != "" {
			out[i] = c.Name + " [" + c.Group + "]"
		}
	}
	return out
}

// checkFacts lists checks for the facts: name, result (when withResult)
// and URL, and the group where the name alone is ambiguous.
func checkFacts(checks []forge.Check, shown []string, idx []int, withResult bool) []any {
	var fs []any
	for _, i := range idx[:min(len(idx), maxFactChecks)] {
		c := checks[i]
		m := map[string]any{"name": c.Name, "url": c.URL}
		if withResult {
			m["result"] = c.Result
		}
		if shown[i] != c.Name {
			m["group"] = c.Group
		}
		fs = append(fs, m)
	}
	return fs
}

// failedSummary is the summary of a commit whose deciding checks all
// finished, some failing or waiting for a manual job:
// "1 of 3 checks failed: lint (https://…)", and a check blocked on a
// manual job said apart, never as a failure.
func failedSummary(checks []forge.Check, shown []string, total int, noun string, failed, manual []int) string {
	describe := func(idx []int, result bool) string {
		var parts []string
		for _, i := range idx[:min(len(idx), maxFailedListed)] {
			parts = append(parts, failedCheck(checks[i], shown[i], result))
		}
		if n := len(idx) - maxFailedListed; n > 0 {
			parts = append(parts, fmt.Sprintf("and %d more", n))
		}
		return strings.Join(parts, ", ")
	}
	waiting := plural(len(manual), "is waiting for a manual job", "are waiting for manual jobs") + ", which nothing starts but a person"
	if len(failed) == 0 {
		return fmt.Sprintf("%d of %d %s %s: %s", len(manual), total, noun, waiting, describe(manual, false))
	}
	s := fmt.Sprintf("%d of %d %s failed: %s", len(failed), total, noun, describe(failed, true))
	if len(manual) > 0 {
		s += fmt.Sprintf("; %d %s: %s", len(manual), waiting, describe(manual, false))
	}
	return s
}

// allFinished reports whether every check of the commit (deciding or
// not) has finished, and when the last of them did; finished is zero
// when the forge gave no time.
func allFinished(checks []forge.Check) (done bool, finished time.Time) {
	for _, c := range checks {
		if !c.State.Done() {
			return false, time.Time{}
		}
		t := c.Updated
		if t.IsZero() {
			t = c.Started
		}
		if t.After(finished) {
			finished = t
		}
	}
	return true, finished
}

// neverAppeared is the sentence of required checks that did not appear
// within MissingGrace of every other check finishing: it names the
// checks that do exist, and on GitHub says how check runs are named.
func neverAppeared(r forge.Report, missing []string) string {
	var names []string
	for _, c := range r.Checks {
		if c.Source != forge.SourceCheckSuite && !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	s := fmt.Sprintf("required %s %s never appeared, %s after every other check finished; the checks of this commit are: %s",
		plural(len(missing), "check", "checks"), list(missing), vigil.FormatDuration(MissingGrace), listN(names, maxNamesListed))
	return s + uiNameHint(r, missing)
}

// uiName matches a check as GitHub's web page shows it:
// "CI / build (push)", workflow / job (event).
var uiName = regexp.MustCompile(`^(.+?) / (.+?)(?: \(([^()]+)\))?$`)

// uiNameHint explains, on GitHub, a required name copied from the web
// page: a check run is named by its job alone.
func uiNameHint(r forge.Report, missing []string) string {
	if r.Provider != forge.GitHub {
		return ""
	}
	for _, m := range missing {
		sub := uiName.FindStringSubmatch(m)
		if sub == nil {
			continue
		}
		job := sub[2]
		for _, c := range r.Checks {
			if c.Name == job && c.Source == forge.SourceCheckRun {
				return fmt.Sprintf("; %q is how GitHub's web page shows the check %q: name it %q (a check run is named by its job alone)",
					clipName(m), clipName(job), clipName(job))
			}
		}
		return fmt.Sprintf("; %q is written as GitHub's web page shows a check (workflow / job (event)): a check run is named by its job alone, like %q",
			clipName(m), clipName(job))
	}
	return ""
}

// counts is the summary of checks not all finished: "3 checks: 2 passed,
// 1 running (build)".
func counts(total int, noun string, shown []string, passed, failed, manual, running, queued []int, missing []string) string {
	if total == 1 {
		noun = strings.TrimSuffix(noun, "s")
	}
	var parts []string
	if len(passed) > 0 {
		parts = append(parts, fmt.Sprintf("%d passed", len(passed)))
	}
	for _, g := range []struct {
		word string
		idx  []int
	}{{"failed", failed}, {"waiting for a manual job", manual}, {"running", running}, {"queued", queued}} {
		if len(g.idx) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(g.idx), g.word, listN(pick(shown, g.idx), maxListed)))
		}
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d not yet appeared (%s)", len(missing), list(missing)))
	}
	return fmt.Sprintf("%d %s: %s", total, noun, strings.Join(parts, ", "))
}

// failedCheck names a failed check with its result when it is not plain
// "failure" (and result is asked for), and its URL: "lint (https://…)",
// "e2e (timed_out, https://…)".
func failedCheck(c forge.Check, shown string, result bool) string {
	var in []string
	if result && c.Result != "" && c.Result != "failure" && c.Result != "failed" {
		in = append(in, c.Result)
	}
	if c.URL != "" {
		in = append(in, c.URL)
	}
	if len(in) == 0 {
		return clipName(shown)
	}
	return clipName(shown) + " (" + strings.Join(in, ", ") + ")"
}

// pick returns the names at idx.
func pick(shown []string, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = shown[i]
	}
	return out
}

// nameList returns the names of at most maxFactChecks checks, for facts.
func nameList(shown []string, idx []int) []string {
	return pick(shown, idx[:min(len(idx), maxFactChecks)])
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// wordTime formats an instant for a summary.
func wordTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func clipName(s string) string { return watcher.Clip(s, 60) }
