package deliver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/watcher"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	all := deliver.Policy{AllowExec: true, SMTP: true}
	for _, tt := range []struct {
		in, want string
	}{
		{``, ``},
		{`null`, ``},
		{`{}`, ``},
		{`{"progress":false}`, ``},
		{`{"progress":true}`, `{"progress":true}`},
		{`{"webhook":{"url":"HTTPS://Hooks.Example/in?x=1"}}`, `{"webhook":{"url":"https://hooks.example/in?x=1"}}`},
		{`{"webhook":{"url":"http://127.0.0.1:9000/","secret":"` + testSecret + `","retry_unknown":true}}`,
			`{"webhook":{"retry_unknown":true,"secret":"` + testSecret + `","url":"http://127.0.0.1:9000/"}}`},
		{`{"command":{"argv":["notify-send","done"]}}`, `{"command":{"argv":["notify-send","done"],"on":"any","timeout":"1m"}}`},
		{`{"command":{"shell":"echo hi","on":"done","timeout":"5s"}}`, `{"command":{"on":"done","shell":"echo hi","timeout":"5s"}}`},
		{`{"email":{"to":"ops@example.com"}}`, `{"email":{"to":"ops@example.com"}}`},
	} {
		got, err := all.Canonicalize(json.RawMessage(tt.in), true)
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	long := make([]string, 300)
	for i := range long {
		long[i] = `"x"`
	}
	for _, tt := range []struct {
		name, in string
		policy   deliver.Policy
		exec     bool
		code     vigil.Code
		field    string
	}{
		{"not an object", `[1]`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver"},
		{"unknown field", `{"sms":{}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver"},
		{"ftp url", `{"webhook":{"url":"ftp://example.com/x"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.url"},
		{"metadata address", `{"webhook":{"url":"http://169.254.169.254/latest"}}`, deliver.Policy{}, true, vigil.CodeWatchUnobservable, "deliver.webhook.url"},
		{"loopback under deny_private", `{"webhook":{"url":"http://127.0.0.1:9/x"}}`, deliver.Policy{Guard: watcher.Guard{DenyPrivate: true}}, true, vigil.CodeWatchUnobservable, "deliver.webhook.url"},
		{"relative url", `{"webhook":{"url":"/hook"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.url"},
		{"file url", `{"webhook":{"url":"file:///etc/passwd"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.url"},
		{"no url", `{"webhook":{}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.url"},
		{"secret without prefix", `{"webhook":{"url":"https://h.example/","secret":"hunter2hunter2hunter2hunter2"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.secret"},
		{"secret not base64", `{"webhook":{"url":"https://h.example/","secret":"whsec_!!!notbase64!!!"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.secret"},
		{"secret too short", `{"webhook":{"url":"https://h.example/","secret":"whsec_c2hvcnQ="}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.secret"},
		{"argv too long", `{"command":{"argv":[` + strings.Join(long, ",") + `]}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command.argv"},
		{"argv arg too long", `{"command":{"argv":["x","` + strings.Repeat("a", 5000) + `"]}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command.argv[1]"},
		{"argv and shell", `{"command":{"argv":["x"],"shell":"y"}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command"},
		{"bad on", `{"command":{"argv":["x"],"on":"sometimes"}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command.on"},
		{"timeout too long", `{"command":{"argv":["x"],"timeout":"1h"}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command.timeout"},
		{"exec off", `{"command":{"argv":["x"]}}`, deliver.Policy{}, true, vigil.CodeWatchUnobservable, "deliver.command"},
		{"no exec scope", `{"command":{"argv":["x"]}}`, deliver.Policy{AllowExec: true}, false, vigil.CodeForbidden, "deliver.command"},
		{"bad address", `{"email":{"to":"not an address"}}`, deliver.Policy{SMTP: true}, true, vigil.CodeInvalidRequest, "deliver.email.to"},
		{"named address", `{"email":{"to":"Ops <ops@example.com>"}}`, deliver.Policy{SMTP: true}, true, vigil.CodeInvalidRequest, "deliver.email.to"},
		{"no smtp", `{"email":{"to":"ops@example.com"}}`, deliver.Policy{}, true, vigil.CodeWatchUnobservable, "deliver.email"},
		// A field in two spellings that differ in case: the last won.
		{"channel twice in another case", `{"webhook":{"url":"https://a.example/"},"Webhook":{"url":"https://b.example/"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook"},
		{"resume twice in another case", `{"resume":{"harness":"claude","session":"s1"},"RESUME":{"harness":"claude","session":"s2"}}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.resume"},
		{"channel field twice in another case", `{"webhook":{"url":"https://a.example/","URL":"https://b.example/"}}`, deliver.Policy{}, true, vigil.CodeInvalidRequest, "deliver.webhook.url"},
		{"a listed command's field twice", `{"command":[{"argv":["x"],"on":"fired"},{"argv":["y"],"Argv":["z"]}]}`, deliver.Policy{AllowExec: true}, true, vigil.CodeInvalidRequest, "deliver.command[1].argv"},
	} {
		got, err := tt.policy.Canonicalize(json.RawMessage(tt.in), tt.exec)
		if vigil.ErrorCode(err) != tt.code || vigil.ErrorField(err) != tt.field {
			t.Errorf("%s: Canonicalize = %s, %v (code %s, field %s); want code %s, field %s", tt.name, got, err,
				vigil.ErrorCode(err), vigil.ErrorField(err), tt.code, tt.field)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "notbase64") {
			t.Errorf("%s: the refusal %q quotes the secret", tt.name, err)
		}
	}
	_, err := deliver.Policy{}.Canonicalize(json.RawMessage(`{"email":{"to":"ops@example.com"}}`), true)
	if !strings.Contains(vigil.ErrorMessage(err), "smtp.host") {
		t.Errorf("email without SMTP: %q, want it to name smtp.host", vigil.ErrorMessage(err))
	}
	_, err = deliver.Policy{}.Canonicalize(json.RawMessage(`{"command":{"argv":["x"]}}`), true)
	if !strings.Contains(vigil.ErrorMessage(err), "--allow-exec") {
		t.Errorf("command without exec: %q, want it to name --allow-exec", vigil.ErrorMessage(err))
	}
}

// TestCanonicalizeKeepsEnvKeys: an env map's keys are names, not fields:
// two that differ in case are two variables.
func TestCanonicalizeKeepsEnvKeys(t *testing.T) {
	t.Parallel()
	got, err := deliver.Policy{AllowExec: true}.Canonicalize(json.RawMessage(`{"command":{"argv":["x"],"env":{"Path":"a","PATH":"b"}}}`), true)
	if err != nil || !strings.Contains(string(got), `"Path":"a"`) || !strings.Contains(string(got), `"PATH":"b"`) {
		t.Errorf("env with two names in two cases = %s, %v; want both kept", got, err)
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{``: false, `{"progress":true}`: true, `{"progress":true,"webhook":{"url":"https://h.example/"}}`: true,
		`{"webhook":{"url":"https://h.example/?q=%22progress%22:true"}}`: false} {
		if got := deliver.Progress(json.RawMessage(in)); got != want {
			t.Errorf("Progress(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestRedactWebhookURLQuery: a webhook URL's secret-named query parameters
// (a token, a signature) are hidden wherever the options are shown, as a
// predicate's are; the others, and the password, as before.
func TestRedactWebhookURLQuery(t *testing.T) {
	t.Parallel()
	got := string(deliver.Redact(json.RawMessage(`{"webhook":{"url":"https://user:hunter2@hooks.example/in?access_token=tok-s3cret&team=ops"}}`)))
	for _, leak := range []string{"tok-s3cret", "hunter2"} {
		if strings.Contains(got, leak) {
			t.Errorf("Redact = %s, holds %q", got, leak)
		}
	}
	if !strings.Contains(got, "team=ops") || !strings.Contains(got, "access_token=") {
		t.Errorf("Redact = %s, want the parameters' names and the other values kept", got)
	}
	if got := deliver.RedactURL("https://hooks.example/in?sig=1&token=abc"); strings.Contains(got, "abc") {
		t.Errorf("RedactURL = %s, holds the token", got)
	}
}
