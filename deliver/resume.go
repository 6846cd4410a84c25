package deliver

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/proc"
)

// Bounds of resume delivery.
const (
	// DefaultResumeTimeout bounds one resumed turn of an agent; a turn
	// may take minutes. MaxResumeTimeout is the most a watch may ask for.
	DefaultResumeTimeout = 10 * time.Minute
	MaxResumeTimeout     = time.Hour
	// MaxSession bounds a session id.
	MaxSession = 128
	// MaxSubstitution bounds the text one placeholder becomes; longer
	// text is cut and ends with "…".
	MaxSubstitution = 8 << 10
)

// Resume adapters: the harnesses whose documented non-interactive resume
// command vigil knows.
const (
	// HarnessClaude runs `claude -p --resume SESSION PROMPT` (Claude Code).
	HarnessClaude = "claude"
	// HarnessCodex runs `codex exec resume SESSION PROMPT` (Codex CLI).
	HarnessCodex = "codex"
)

// Placeholders of a resume argv template. Each stands for one whole
// argument: an element that is exactly "{sentence}" becomes the outcome's
// sentence, as one argument whatever it holds. Nothing runs through a
// shell, and a placeholder inside a longer element is refused.
const (
	PlaceholderSentence  = "{sentence}"
	PlaceholderState     = "{state}"
	PlaceholderWatchID   = "{watch_id}"
	PlaceholderKind      = "{kind}"
	PlaceholderRecipient = "{recipient}"
	// PlaceholderPrompt is the text the claude and codex adapters send:
	// the outcome framed for the resumed agent (see Prompt).
	PlaceholderPrompt = "{prompt}"
	// PlaceholderFacts starts "{facts.<path>}": the value at a gjson path
	// into the observation's facts ("" when there is none), a string as
	// it is and anything else as JSON.
	PlaceholderFacts = "{facts."
)

var placeholders = []string{PlaceholderSentence, PlaceholderState, PlaceholderWatchID, PlaceholderKind, PlaceholderRecipient, PlaceholderPrompt}

// ResumeOptions start a new turn in a saved agent session with the
// outcome: either an adapter (Harness and Session) or a generic argv
// template (Argv) whose placeholder elements are filled from the outcome.
//
//	{"harness": "claude", "session": "3f9f…", "cwd"?, "env"?, "on"?, "timeout"?}
//	{"argv": ["my-agent", "--resume", "s1", "{sentence}"], "cwd"?, "env"?, "on"?, "timeout"?}
type ResumeOptions struct {
	Harness string   `json:"harness,omitempty"`
	Session string   `json:"session,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Cwd is where it runs (absolute). Claude Code finds a session under
	// the directory it was started in, so resume runs there.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// On is when it runs: OnAny (default), OnDone or OnFail.
	On string `json:"on,omitempty"`
	// Timeout bounds the run (default DefaultResumeTimeout).
	Timeout string `json:"timeout,omitempty"`
}

// Wakes compare the wake a registration asked for (asked, its delivery
// options) with that of the pending watch it matched (kept): want is the
// wake asked for, nil when it asked for none (or its options do not
// parse); other is the pending watch's, nil when it wakes nobody; same
// says both wake the same session.
func Wakes(asked, kept json.RawMessage) (want, other *ResumeOptions, same bool) {
	a, err := ParseOptions(asked)
	if err != nil || a.Resume == nil {
		return nil, nil, false
	}
	if k, err := ParseOptions(kept); err == nil {
		other = k.Resume
	}
	// A template names its session among its arguments: the same session
	// only as the same template.
	same = other != nil && other.Harness == a.Resume.Harness && other.Session == a.Resume.Session && slices.Equal(other.Argv, a.Resume.Argv)
	return a.Resume, other, same
}

// Template returns the argv template the options run: the adapter's
// documented resume command, or Argv.
func (r *ResumeOptions) Template() []string {
	switch r.Harness {
	case HarnessClaude:
		return []string{"claude", "-p", "--resume", r.Session, PlaceholderPrompt}
	case HarnessCodex:
		return []string{"codex", "exec", "resume", r.Session, PlaceholderPrompt}
	}
	return r.Argv
}

// Runs reports whether the resume runs for an outcome state (as
// CommandOptions.Runs).
func (r *ResumeOptions) Runs(s vigil.State) bool {
	c := CommandOptions{On: r.On}
	return c.Runs(s)
}

// ResumeTimeout is the run bound of canonical resume options.
func (r *ResumeOptions) ResumeTimeout() time.Duration {
	if d, err := vigil.ParseDuration(r.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultResumeTimeout
}

// Program returns the program to run for an outcome: the template with
// each placeholder element replaced by its value from p. Nothing is
// parsed by a shell.
//
// A value comes from outside (a sentence quoting a forge's title, facts
// from an HTTP body), so it is refused, and nothing runs, when it would
// not reach the program as the one argument it stands for: a value that
// starts with "-" unless an element "--" comes before it (the program
// would read it as an option), and a value holding a NUL byte (no
// argument can carry one). The error says which, and is the receipt's
// detail.
func (r *ResumeOptions) Program(p *Payload) (proc.Program, error) {
	tpl := r.Template()
	argv := make([]string, len(tpl))
	operands := false // after an element "--", nothing is an option
	for i, a := range tpl {
		if i > 0 {
			if v, ok := substitute(a, p); ok {
				switch {
				case strings.IndexByte(v, 0) >= 0:
					return proc.Program{}, fmt.Errorf("the value of %s (argv[%d]) holds a NUL byte, which no argument can carry: not run", a, i)
				case strings.HasPrefix(v, "-") && !operands:
					return proc.Program{}, fmt.Errorf("the value of %s (argv[%d]) starts with \"-\" and would be read as an option: not run (an element \"--\" before it passes such a value as an argument)", a, i)
				}
				argv[i] = v
				continue
			}
			operands = operands || a == "--"
		}
		argv[i] = a
	}
	return proc.Program{Argv: argv, Cwd: r.Cwd, Env: maps.Clone(r.Env)}, nil
}

// substitute returns the value of a placeholder element, and false when a
// is not one.
func substitute(a string, p *Payload) (string, bool) {
	var v string
	switch a {
	case PlaceholderSentence:
		v = p.Sentence
	case PlaceholderState:
		v = string(p.State)
	case PlaceholderWatchID:
		v = p.WatchID
	case PlaceholderKind:
		v = string(p.Kind)
	case PlaceholderRecipient:
		v = p.Recipient
	case PlaceholderPrompt:
		v = Prompt(p)
	default:
		path, ok := factsPath(a)
		if !ok {
			return "", false
		}
		v = factValue(p, path)
	}
	return clipText(v, MaxSubstitution), true
}

// factsPath returns the gjson path of a "{facts.<path>}" element.
func factsPath(a string) (string, bool) {
	rest, ok := strings.CutPrefix(a, PlaceholderFacts)
	if !ok || !strings.HasSuffix(rest, "}") || len(rest) < 2 {
		return "", false
	}
	return rest[:len(rest)-1], true
}

// factValue is the value at path in the outcome's observation facts: a
// string as it is, anything else as its JSON, "" when there is none.
func factValue(p *Payload, path string) string {
	if p.Observation == nil || len(p.Observation.Facts) == 0 {
		return ""
	}
	b, err := json.Marshal(p.Observation.Facts)
	if err != nil {
		return ""
	}
	res := gjson.GetBytes(b, path)
	switch {
	case !res.Exists():
		return ""
	case res.Type == gjson.String:
		return res.Str
	}
	return res.Raw
}

// Prompt is the text the claude and codex adapters start the resumed turn
// with ({prompt}): what settled and how, the watch's note, and where to
// read the rest.
//
//	vigil: your watch 01JD… (http) fired: https://… answered 200.
//	Note: merge PR 41 when green
//	Details: vigil show 01JD… (or the watch_get tool).
//
// The sentence and each line of the note are plain text
// (vigil.PlainText): a control character, a terminal escape sequence or a
// bidi control in them (a forge's title quoted in a sentence stored
// before sentences were made plain, a note) is spelled visibly, never
// handed to the agent as it is. The note keeps its line breaks.
func Prompt(p *Payload) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vigil: your watch %s (%s) %s: %s", p.WatchID, p.Kind, p.State, vigil.PlainText(p.Sentence))
	if p.Note != "" {
		b.WriteString("\nNote: ")
		for i, l := range strings.Split(p.Note, "\n") {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(vigil.PlainText(strings.TrimSuffix(l, "\r")))
		}
	}
	fmt.Fprintf(&b, "\nDetails: vigil show %s (or the watch_get tool).", p.WatchID)
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// checkResume validates resume options and fills their defaults: an
// adapter with a session id, or a template whose placeholders are known
// and whole elements; and exec allowed by the daemon and the token.
func (p Policy) checkResume(r *ResumeOptions, scopeExec bool) error {
	switch {
	case r.Harness != "" && len(r.Argv) > 0:
		return invalid("deliver.resume", "has both harness and argv: give an adapter (harness and session) or an argv template")
	case r.Harness == "" && len(r.Argv) == 0:
		return invalid("deliver.resume", "needs an adapter (harness %q or %q, and session) or an argv template", HarnessClaude, HarnessCodex)
	case r.Harness != "":
		if r.Harness != HarnessClaude && r.Harness != HarnessCodex {
			return invalid("deliver.resume.harness", "must be %q or %q, not %q; for another agent give an argv template", HarnessClaude, HarnessCodex, clipText(r.Harness, 64))
		}
		if err := checkSession(r.Session); err != nil {
			return err
		}
	default:
		if r.Session != "" {
			return invalid("deliver.resume.session", "goes with harness; in an argv template write the session id as an argument")
		}
		if err := checkTemplate(r.Argv); err != nil {
			return err
		}
	}
	prog := proc.Program{Argv: r.Template(), Cwd: r.Cwd, Env: r.Env}
	if err := prog.Check("deliver.resume"); err != nil {
		var ve *vigil.Error
		if errors.As(err, &ve) {
			field := strings.TrimPrefix(ve.Field, "predicate.")
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, field, "%s", strings.Replace(ve.Message, "predicate.", "", 1))
		}
		return invalid("deliver.resume", "%v", err)
	}
	r.Cwd, r.Env = prog.Cwd, prog.Env
	return checkExec(execRule{field: "deliver.resume", name: "resume", runs: "the agent's program",
		def: DefaultResumeTimeout, max: MaxResumeTimeout}, &r.On, &r.Timeout, p, scopeExec)
}

// checkSession refuses an empty session id, and one that is not a plain
// name: it becomes one argument of the harness's command line, and one
// starting with "-" would be read as an option.
func checkSession(s string) error {
	switch {
	case s == "":
		return invalid("deliver.resume.session", "is empty: give the id of the saved session to resume")
	case len(s) > MaxSession:
		return invalid("deliver.resume.session", "is longer than %d bytes", MaxSession)
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_' || c == '.' || c == ':')
		if !ok {
			return invalid("deliver.resume.session", "must be a session id: letters, digits and - _ . :, starting with a letter or digit")
		}
	}
	return nil
}

// checkTemplate refuses a placeholder it does not know, a placeholder
// inside a longer element (placeholders are whole arguments), and a
// placeholder as the program (argv[0] is fixed).
func checkTemplate(argv []string) error {
	for i, a := range argv {
		field := fmt.Sprintf("deliver.resume.argv[%d]", i)
		whole := isPlaceholderShape(a)
		if whole {
			if _, ok := factsPath(a); ok {
				if path := a[len(PlaceholderFacts) : len(a)-1]; path == "" {
					return invalid(field, "names no facts path: write {facts.<path>}, like {facts.status}")
				}
			} else if !isKnownPlaceholder(a) {
				return invalid(field, "is the unknown placeholder %q; the placeholders are %s and {facts.<path>}", clipText(a, 64), strings.Join(placeholders, ", "))
			}
			if i == 0 {
				return invalid(field, "must name the program, not a placeholder")
			}
			continue
		}
		for _, ph := range append(placeholders, PlaceholderFacts) {
			if strings.Contains(a, ph) {
				return invalid(field, "holds the placeholder %s inside a longer argument; placeholders stand for whole arguments: give it as an element of its own", strings.TrimSuffix(ph, "."))
			}
		}
	}
	return nil
}

func isKnownPlaceholder(a string) bool {
	for _, ph := range placeholders {
		if a == ph {
			return true
		}
	}
	return false
}

// isPlaceholderShape reports whether a is written as a placeholder: "{"
// then a lower-case name (and for facts, ".path"), then "}".
func isPlaceholderShape(a string) bool {
	if len(a) < 3 || a[0] != '{' || a[len(a)-1] != '}' {
		return false
	}
	inner := a[1 : len(a)-1]
	name, _, _ := strings.Cut(inner, ".")
	if name == "" {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return !strings.ContainsAny(inner, "{}")
}
