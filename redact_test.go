package vigil_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"https://example.com/x?a=1", "https://example.com/x?a=1"},
		{"https://user:pw@example.com/x", "https://user:[redacted]@example.com/x"},
		{"https://user@example.com/x", "https://user@example.com/x"},
		{"https://example.com/cb?access_token=abc&x=1", "https://example.com/cb?access_token=[redacted]&x=1"},
		{"not a url", "not a url"},
		{"http://u:p%zz@host/", "http://[redacted]@host/"},
	} {
		if got := vigil.RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	in := json.RawMessage(`{"headers":{"Authorization":"Bearer s3cret","X-Api-Key":"k3y","Accept":"json"},"url":"https://bob:pw0rd@example.com/health","env":{"GITHUB_TOKEN":"ghp_x"},"list":["https://a:b@c/"],"n":1.50}`)
	got := string(vigil.RedactJSON(in))
	for _, secret := range []string{"s3cret", "k3y", "pw0rd", "ghp_x", "a:b@"} {
		if strings.Contains(got, secret) {
			t.Errorf("RedactJSON kept %q: %s", secret, got)
		}
	}
	for _, kept := range []string{`"Accept":"json"`, `"n":1.50`, "bob:[redacted]@example.com"} {
		if !strings.Contains(got, kept) {
			t.Errorf("RedactJSON lost %q: %s", kept, got)
		}
	}
	plain := json.RawMessage(`{"url":"https://example.com/","every":"30s"}`)
	if got := vigil.RedactJSON(plain); &got[0] != &plain[0] {
		t.Errorf("RedactJSON(%s) copied a predicate with no secrets", plain)
	}
}

// TestRedactJSONQuick holds the scan that lets a predicate with nothing to
// redact through without decoding it: such a predicate costs no
// allocation, and what only a decode can see (an escaped key, a letter
// outside ASCII that lowers into a secret word, a password in a URL) is
// still redacted. Not parallel: AllocsPerRun refuses to run beside other
// tests.
func TestRedactJSONQuick(t *testing.T) {
	for _, in := range []string{
		`{"at":"2026-12-01T18:00:00Z"}`,
		`{"url":"https://example.com/health?x=1","status":200}`,
		`{"provider":"github","repo":"acme/api","sha":"0123456789abcdef"}`,
	} {
		raw := json.RawMessage(in)
		if n := testing.AllocsPerRun(100, func() { vigil.RedactJSON(raw) }); n != 0 {
			t.Errorf("RedactJSON(%s) allocated %v times, want 0", in, n)
		}
	}
	for in, secret := range map[string]string{
		`{"headers":{"\u0041uthorization":"Bearer s3cret"}}`: "s3cret",
		"{\"API_\u212AEY\":\"k3y\"}":                         "k3y",
		`{"url":"https://bob:pw0rd@example.com/"}`:           "pw0rd",
		`{"url":"https://example.com/?access_TOKEN=t0k"}`:    "t0k",
		`{"URL":"HTTPS://bob:pw0rd@EXAMPLE.COM/"}`:           "pw0rd",
	} {
		if got := string(vigil.RedactJSON(json.RawMessage(in))); strings.Contains(got, secret) {
			t.Errorf("RedactJSON(%s) = %s, kept %q", in, got, secret)
		}
	}
}
