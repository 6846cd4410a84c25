package folder

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fspath"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
)

type input struct {
	Path           string          `json:"path"`
	Pattern        json.RawMessage `json:"pattern,omitempty"`
	Settle         json.RawMessage `json:"settle,omitempty"`
	MaxWait        json.RawMessage `json:"max_wait,omitempty"`
	Standing       bool            `json:"standing,omitempty"`
	MaxFileBytes   *int64          `json:"max_file_bytes,omitempty"`
	MaxFiles       *int            `json:"max_files,omitempty"`
	ReportMaxChars *int            `json:"report_max_chars,omitempty"`
	OnChange       json.RawMessage `json:"on_change,omitempty"`
}

type canonical struct {
	Path           string    `json:"path"`
	Pattern        []string  `json:"pattern,omitempty"`
	Settle         string    `json:"settle"`
	MaxWait        string    `json:"max_wait"`
	Standing       bool      `json:"standing,omitempty"`
	MaxFileBytes   int64     `json:"max_file_bytes"`
	MaxFiles       int       `json:"max_files"`
	ReportMaxChars int       `json:"report_max_chars"`
	OnChange       *reviewer `json:"on_change,omitempty"`
}

// reviewer is on_change: a program that reads the report on stdin.
type reviewer struct {
	proc.Program
	Timeout string `json:"timeout"`
}

type reviewerInput struct {
	Argv    []string          `json:"argv,omitempty"`
	Shell   string            `json:"shell,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout string            `json:"timeout,omitempty"`
}

type spec struct {
	canonical
	settle        time.Duration
	maxWait       time.Duration
	reviewTimeout time.Duration
}

func parse(raw json.RawMessage) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	var err error
	if s.Path, err = fspath.Check("path", in.Path, MaxPath); err != nil {
		return nil, err
	}
	if s.Pattern, err = parsePatterns(in.Pattern); err != nil {
		return nil, err
	}
	if s.settle, err = parseSettle(in.Settle); err != nil {
		return nil, err
	}
	s.Settle = vigil.FormatDuration(s.settle)
	if s.maxWait, err = parseMaxWait(in.MaxWait, s.settle); err != nil {
		return nil, err
	}
	s.MaxWait = vigil.FormatDuration(s.maxWait)
	s.Standing = in.Standing
	s.MaxFileBytes = DefaultMaxFileBytes
	if in.MaxFileBytes != nil {
		if *in.MaxFileBytes < 1 || *in.MaxFileBytes > MaxMaxFileBytes {
			return nil, watcher.InvalidPredicate("max_file_bytes", "must be from 1 to %d", MaxMaxFileBytes)
		}
		s.MaxFileBytes = *in.MaxFileBytes
	}
	s.MaxFiles = DefaultMaxFiles
	if in.MaxFiles != nil {
		if *in.MaxFiles < 1 || *in.MaxFiles > MaxMaxFiles {
			return nil, watcher.InvalidPredicate("max_files", "must be from 1 to %d", MaxMaxFiles)
		}
		s.MaxFiles = *in.MaxFiles
	}
	s.ReportMaxChars = DefaultReportMaxChars
	if in.ReportMaxChars != nil {
		if *in.ReportMaxChars < MinReportMaxChars || *in.ReportMaxChars > MaxReportMaxChars {
			return nil, watcher.InvalidPredicate("report_max_chars", "must be from %d to %d", MinReportMaxChars, MaxReportMaxChars)
		}
		s.ReportMaxChars = *in.ReportMaxChars
	}
	if s.OnChange, s.reviewTimeout, err = parseReviewer(in.OnChange); err != nil {
		return nil, err
	}
	return s, nil
}

// parsePatterns reads pattern: a string or a list of strings, each of
// which may hold several globs separated by commas (outside braces, so
// "*.{go,md}" stays one glob). The result is sorted and without repeats.
func parsePatterns(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []string
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, watcher.InvalidPredicate("pattern", "must be a glob or a list of globs")
		}
	} else {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, watcher.InvalidPredicate("pattern", "must be a glob or a list of globs")
		}
		items = []string{one}
	}
	var out []string
	for _, item := range items {
		for _, p := range splitGlobs(item) {
			p = strings.TrimSpace(p)
			p = strings.TrimPrefix(p, "./")
			p = strings.TrimLeft(p, "/")
			if p == "" {
				continue
			}
			switch {
			case len(p) > MaxPatternBytes:
				return nil, watcher.InvalidPredicate("pattern", "holds a glob longer than %d bytes", MaxPatternBytes)
			case strings.ContainsRune(p, 0):
				return nil, watcher.InvalidPredicate("pattern", "must not hold a NUL byte")
			case !doublestar.ValidatePattern(p):
				return nil, watcher.InvalidPredicate("pattern", "holds %q, which is not a valid glob", watcher.Clip(p, 64))
			}
			out = append(out, p)
		}
	}
	if len(out) > MaxPatterns {
		return nil, watcher.InvalidPredicate("pattern", "holds %d globs; at most %d are allowed", len(out), MaxPatterns)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// splitGlobs splits s at commas that are not inside braces or escaped.
func splitGlobs(s string) []string {
	var out []string
	depth, start, escaped := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// parseSettle reads settle: a duration string ("20s", "0") or a number of
// seconds; absent means DefaultSettle, zero reports every change.
func parseSettle(raw json.RawMessage) (time.Duration, error) {
	d, ok, err := parseDuration(raw, "settle", "must be a duration like 20s, or 0")
	if err != nil || !ok {
		return DefaultSettle, err
	}
	if d > MaxSettle {
		return 0, watcher.InvalidPredicate("settle", "must be at most %s", vigil.FormatDuration(MaxSettle))
	}
	return d, nil
}

// parseMaxWait reads max_wait, the longest a burst that never goes quiet
// waits before it is reported anyway: a duration like settle, at least
// settle and at most MaxMaxWait; absent means DefaultMaxWait(settle).
func parseMaxWait(raw json.RawMessage, settle time.Duration) (time.Duration, error) {
	d, ok, err := parseDuration(raw, "max_wait", "must be a duration like 2m")
	if err != nil || !ok {
		return DefaultMaxWait(settle), err
	}
	switch {
	case d < settle || d == 0:
		return 0, watcher.InvalidPredicate("max_wait", "must be more than 0 and at least settle (%s): it bounds how long a burst that never goes quiet waits", vigil.FormatDuration(settle))
	case d > MaxMaxWait:
		return 0, watcher.InvalidPredicate("max_wait", "must be at most %s", vigil.FormatDuration(MaxMaxWait))
	}
	return d, nil
}

// DefaultMaxWait is max_wait's default for a settle window: five times
// settle, and at least a minute.
func DefaultMaxWait(settle time.Duration) time.Duration { return max(5*settle, time.Minute) }

// parseDuration reads a duration string ("20s", "0") or a number of
// seconds, to the millisecond; ok is false when raw is absent or null.
func parseDuration(raw json.RawMessage, field, refusal string) (d time.Duration, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	if raw[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return 0, false, watcher.InvalidPredicate(field, "%s", refusal)
		}
		if strings.TrimSpace(str) == "0" {
			str = "0s"
		}
		var err error
		if d, err = vigil.ParseDuration(str); err != nil {
			return 0, false, watcher.InvalidPredicate(field, "%s", refusal)
		}
	} else {
		var secs float64
		if err := json.Unmarshal(raw, &secs); err != nil || secs < 0 || secs > float64(365*24*time.Hour/time.Second) {
			return 0, false, watcher.InvalidPredicate(field, "%s", refusal)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	return d.Truncate(time.Millisecond), true, nil
}

// parseReviewer reads on_change: a list of strings (argv), a string (a
// /bin/sh command line) or an object {argv | shell, cwd, env, timeout}.
func parseReviewer(raw json.RawMessage) (*reviewer, time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, 0, nil
	}
	var in reviewerInput
	switch raw[0] {
	case '[':
		if err := json.Unmarshal(raw, &in.Argv); err != nil {
			return nil, 0, watcher.InvalidPredicate("on_change", "must be a program and its arguments, a shell command line, or an object with argv or shell")
		}
	case '"':
		if err := json.Unmarshal(raw, &in.Shell); err != nil {
			return nil, 0, watcher.InvalidPredicate("on_change", "must be a shell command line")
		}
	default:
		if err := watcher.Decode(raw, "on_change", &in); err != nil {
			return nil, 0, err
		}
	}
	r := &reviewer{Program: proc.Program{Argv: in.Argv, Shell: in.Shell, Cwd: in.Cwd, Env: in.Env}}
	if err := r.Check("on_change"); err != nil {
		return nil, 0, err
	}
	timeout, err := watcher.DurationField("on_change.timeout", in.Timeout, DefaultReviewTimeout, proc.MaxTimeout)
	if err != nil {
		return nil, 0, err
	}
	r.Timeout = vigil.FormatDuration(timeout)
	return r, timeout, nil
}

// match reports whether the file at rel (slash-separated, relative to the
// folder) is watched. A glob without a slash matches the file's name at
// any depth ("*.go"); one with a slash matches the whole relative path
// ("src/**/*.go"). No pattern watches every file.
func (s *spec) match(rel string) bool {
	if len(s.Pattern) == 0 {
		return true
	}
	for _, p := range s.Pattern {
		name := rel
		if !strings.Contains(p, "/") {
			name = path.Base(rel)
		}
		if ok, _ := doublestar.Match(p, name); ok {
			return true
		}
	}
	return false
}
