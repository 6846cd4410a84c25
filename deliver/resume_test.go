package deliver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

// TestCanonicalizeResume: an adapter (harness and session) or an argv
// template, with on and timeout filled in.
func TestCanonicalizeResume(t *testing.T) {
	t.Parallel()
	p := deliver.Policy{AllowExec: true}
	for _, tt := range []struct{ in, want string }{
		{`{"resume":{"harness":"claude","session":"3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d","cwd":"/src/app/"}}`,
			`{"resume":{"cwd":"/src/app","harness":"claude","on":"any","session":"3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d","timeout":"10m"}}`},
		{`{"resume":{"harness":"codex","session":"019d1afb-b2c7","on":"done","timeout":"30m"}}`,
			`{"resume":{"harness":"codex","on":"done","session":"019d1afb-b2c7","timeout":"30m"}}`},
		{`{"resume":{"argv":["my-agent","--resume","s1","{sentence}","{facts.status}","{x","a{b}c","{}"]}}`,
			`{"resume":{"argv":["my-agent","--resume","s1","{sentence}","{facts.status}","{x","a{b}c","{}"],"on":"any","timeout":"10m"}}`},
	} {
		got, err := p.Canonicalize(json.RawMessage(tt.in), true)
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// TestResumeRefusals: the bad input — an unknown adapter, an empty
// session id, a template with an unknown placeholder, a resume without
// exec allowed — each refused naming the field at fault.
func TestResumeRefusals(t *testing.T) {
	t.Parallel()
	exec := deliver.Policy{AllowExec: true}
	for _, tt := range []struct {
		name, in string
		policy   deliver.Policy
		scope    bool
		code     vigil.Code
		field    string
	}{
		{"unknown adapter", `{"resume":{"harness":"gemini","session":"s1"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.harness"},
		{"empty session", `{"resume":{"harness":"claude","session":""}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"no session", `{"resume":{"harness":"codex"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"session is an option", `{"resume":{"harness":"claude","session":"--dangerously-skip-permissions"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"session with a space", `{"resume":{"harness":"claude","session":"a b"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"session too long", `{"resume":{"harness":"claude","session":"` + strings.Repeat("a", 129) + `"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"unknown placeholder", `{"resume":{"argv":["agent","{message}"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[1]"},
		{"placeholder inside an argument", `{"resume":{"argv":["agent","--say={sentence}"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[1]"},
		{"facts inside an argument", `{"resume":{"argv":["agent","x{facts.a}"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[1]"},
		{"facts without a path", `{"resume":{"argv":["agent","{facts.}"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[1]"},
		{"placeholder as the program", `{"resume":{"argv":["{sentence}"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[0]"},
		{"option as the program", `{"resume":{"argv":["-x"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.argv[0]"},
		{"harness and argv", `{"resume":{"harness":"claude","session":"s","argv":["x"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume"},
		{"session with argv", `{"resume":{"session":"s","argv":["x"]}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"neither", `{"resume":{}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume"},
		{"relative cwd", `{"resume":{"harness":"claude","session":"s","cwd":"src"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.cwd"},
		{"bad on", `{"resume":{"harness":"claude","session":"s","on":"later"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.on"},
		{"timeout too long", `{"resume":{"harness":"claude","session":"s","timeout":"2h"}}`, exec, true, vigil.CodeInvalidRequest, "deliver.resume.timeout"},
		{"unknown field", `{"resume":{"harness":"claude","session":"s","shell":"x"}}`, exec, true, vigil.CodeInvalidRequest, "deliver"},
		{"exec off", `{"resume":{"harness":"claude","session":"s"}}`, deliver.Policy{}, true, vigil.CodeWatchUnobservable, "deliver.resume"},
		{"no exec scope", `{"resume":{"harness":"claude","session":"s"}}`, exec, false, vigil.CodeForbidden, "deliver.resume"},
		{"template without exec", `{"resume":{"argv":["agent","{sentence}"]}}`, deliver.Policy{}, true, vigil.CodeWatchUnobservable, "deliver.resume"},
	} {
		got, err := tt.policy.Canonicalize(json.RawMessage(tt.in), tt.scope)
		if vigil.ErrorCode(err) != tt.code || vigil.ErrorField(err) != tt.field {
			t.Errorf("%s: Canonicalize = %s, %v (code %s, field %s); want code %s, field %s", tt.name, got, err,
				vigil.ErrorCode(err), vigil.ErrorField(err), tt.code, tt.field)
		}
	}
	_, err := deliver.Policy{}.Canonicalize(json.RawMessage(`{"resume":{"harness":"claude","session":"s"}}`), true)
	if !strings.Contains(vigil.ErrorMessage(err), "--allow-exec") {
		t.Errorf("resume without exec: %q, want it to name --allow-exec", vigil.ErrorMessage(err))
	}
	_, err = exec.Canonicalize(json.RawMessage(`{"resume":{"argv":["agent","{message}"]}}`), true)
	if !strings.Contains(vigil.ErrorMessage(err), "{sentence}") {
		t.Errorf("unknown placeholder: %q, want it to list the placeholders", vigil.ErrorMessage(err))
	}
}

// TestResumeProgram: the adapters run the harnesses' documented resume
// commands with the prompt as ONE argument; a template's placeholder
// elements become the outcome's values, each one argument, whatever they
// hold; other elements pass unchanged.
func TestResumeProgram(t *testing.T) {
	t.Parallel()
	sentence := `The command "deploy; rm -rf /" exited 0 with $(whoami) and 'quotes'.`
	w := &vigil.Watch{ID: "01W", Kind: vigil.KindCommand, Recipient: "agent-7", State: vigil.StateFired, Note: "merge PR 41",
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: sentence,
			Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, Facts: map[string]any{"status": 200, "body": map[string]any{"phase": "Ready"}}}}}
	p := deliver.NewPayload(w, "01M")
	prompt := "vigil: your watch 01W (command) fired: " + sentence + "\nNote: merge PR 41\nDetails: vigil show 01W (or the watch_get tool)."
	for _, tt := range []struct {
		opts string
		want []string
	}{
		{`{"harness":"claude","session":"s-1"}`, []string{"claude", "-p", "--resume", "s-1", prompt}},
		{`{"harness":"codex","session":"s-2"}`, []string{"codex", "exec", "resume", "s-2", prompt}},
		{`{"argv":["agent","{sentence}","{state}","{watch_id}","{kind}","{recipient}","{facts.status}","{facts.body.phase}","{facts.body}","{facts.none}","{prompt}","{x","--flag"]}`,
			[]string{"agent", sentence, "fired", "01W", "command", "agent-7", "200", "Ready", `{"phase":"Ready"}`, "", prompt, "{x", "--flag"}},
	} {
		var r deliver.ResumeOptions
		if err := json.Unmarshal([]byte(tt.opts), &r); err != nil {
			t.Fatal(err)
		}
		got, err := r.Program(&p)
		if err != nil || !slices.Equal(got.Argv, tt.want) {
			t.Errorf("%s: argv = %q, %v; want %q", tt.opts, got.Argv, err, tt.want)
		}
	}
	long := deliver.NewPayload(&vigil.Watch{ID: "01W", State: vigil.StateFired, Outcome: &vigil.Outcome{Sentence: strings.Repeat("é", 10000)}}, "01M")
	r := deliver.ResumeOptions{Argv: []string{"agent", "{sentence}"}}
	if prog, err := r.Program(&long); err != nil {
		t.Errorf("a long sentence: %v", err)
	} else if a := prog.Argv[1]; len(a) > deliver.MaxSubstitution || !strings.HasSuffix(a, "…") || !json.Valid([]byte(`"`+a+`"`)) {
		t.Errorf("a long sentence became %d bytes, want at most %d ending in …, valid UTF-8", len(a), deliver.MaxSubstitution)
	}
}

// TestResumeProgramRefusesOptions: a value from outside (facts from an
// HTTP body, a sentence quoting a title) that starts with "-" is not
// passed where the program would read it as an option, nor a value with
// a NUL byte, which no argument carries: Program refuses, naming the
// placeholder and why. After an element "--" such a value is an argument
// like any other; the template's own elements are its author's.
func TestResumeProgramRefusesOptions(t *testing.T) {
	t.Parallel()
	w := &vigil.Watch{ID: "01W", Kind: vigil.KindHTTP, Recipient: "agent-7", State: vigil.StateFired, Note: "a\x00b",
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "-rf answered 200.",
			Observation: &vigil.Observation{Facts: map[string]any{"title": "--dangerously-skip-permissions", "dash": "-", "nul": "x\x00y", "n": -3, "ok": "fine"}}}}
	p := deliver.NewPayload(w, "01M")
	for _, tt := range []struct {
		argv []string
		want []string // nil: refused
		why  string
	}{
		{[]string{"my-agent", "--resume", "s1", "{facts.title}"}, nil, `the value of {facts.title} (argv[3]) starts with "-" and would be read as an option`},
		{[]string{"my-agent", "--message", "{sentence}"}, nil, `the value of {sentence} (argv[2]) starts with "-"`},
		{[]string{"my-agent", "{facts.dash}"}, nil, `{facts.dash} (argv[1]) starts with "-"`},
		{[]string{"my-agent", "{facts.n}"}, nil, `{facts.n} (argv[1]) starts with "-"`},
		{[]string{"my-agent", "--", "{facts.nul}"}, nil, `the value of {facts.nul} (argv[2]) holds a NUL byte`},
		// The prompt spells a control character of its note (a NUL too).
		{[]string{"my-agent", "--", "{prompt}"}, []string{"my-agent", "--", "vigil: your watch 01W (http) fired: -rf answered 200.\nNote: a\\x00b\nDetails: vigil show 01W (or the watch_get tool)."}, ""},
		{[]string{"my-agent", "{facts.ok}", "--force", "--", "{facts.title}", "{sentence}", "{facts.dash}", "{facts.n}", "-x"},
			[]string{"my-agent", "fine", "--force", "--", "--dangerously-skip-permissions", "-rf answered 200.", "-", "-3", "-x"}, ""},
		{[]string{"my-agent", "{facts.title}", "--", "x"}, nil, `{facts.title} (argv[1]) starts with "-"`},
	} {
		r := deliver.ResumeOptions{Argv: tt.argv}
		got, err := r.Program(&p)
		switch {
		case tt.want == nil && (err == nil || !strings.Contains(err.Error(), tt.why)):
			t.Errorf("%q: Program = %q, %v; want refused: %s", tt.argv, got.Argv, err, tt.why)
		case tt.want != nil && (err != nil || !slices.Equal(got.Argv, tt.want)):
			t.Errorf("%q: Program = %q, %v; want %q", tt.argv, got.Argv, err, tt.want)
		}
	}
	// The adapters' prompt starts "vigil:", never "-".
	w.Note = "-x"
	p = deliver.NewPayload(w, "01M")
	for _, h := range []string{deliver.HarnessClaude, deliver.HarnessCodex} {
		r := deliver.ResumeOptions{Harness: h, Session: "s1"}
		if _, err := r.Program(&p); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
}

// TestResumeRunsFor: like a command, on names the outcome classes; a
// cancellation never resumes anything.
func TestResumeRunsFor(t *testing.T) {
	t.Parallel()
	for on, want := range map[string][]vigil.State{
		"":     {vigil.StateFired, vigil.StateFailed, vigil.StateErrored, vigil.StateExpired},
		"done": {vigil.StateFired},
		"fail": {vigil.StateFailed, vigil.StateErrored, vigil.StateExpired},
	} {
		r := deliver.ResumeOptions{On: on}
		var got []vigil.State
		for _, s := range []vigil.State{vigil.StateFired, vigil.StateFailed, vigil.StateErrored, vigil.StateExpired, vigil.StateCancelled} {
			if r.Runs(s) {
				got = append(got, s)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("on %q runs for %v, want %v", on, got, want)
		}
	}
}

// TestRedactResumeEnv: a resume's env values are hidden like a command's.
func TestRedactResumeEnv(t *testing.T) {
	t.Parallel()
	got := string(deliver.Redact(json.RawMessage(`{"resume":{"harness":"claude","session":"s","env":{"ANTHROPIC_API_KEY":"sk-ant-secret"}}}`)))
	if strings.Contains(got, "sk-ant-secret") || !strings.Contains(got, "ANTHROPIC_API_KEY") {
		t.Errorf("Redact = %s, want the env value hidden and its name kept", got)
	}
}
