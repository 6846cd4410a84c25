package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestTokenCommands: the admin creates a scoped token (printed once),
// lists it (never the plaintext), the token acts for its recipient only,
// and after revoke it is refused.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "token", "create", "--for", "agent-a,agent-b", "--kinds", "timer", "--expires", "30d", "--json")
	if r.code != 0 {
		t.Fatalf("token create: exit %d: %s", r.code, r.stderr)
	}
	var tok vigil.Token
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil || !strings.HasPrefix(tok.Secret, vigil.TokenPrefix) {
		t.Fatalf("token create --json printed %q (%v)", r.stdout, err)
	}
	r = d.vigil(t, "token", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, tok.ID) || !strings.Contains(r.stdout, "agent-a,agent-b") || strings.Contains(r.stdout, tok.Secret) {
		t.Errorf("token ls: exit %d %q: want the token, never its plaintext", r.code, r.stdout)
	}
	as := func(args ...string) result {
		return runCLI(t, map[string]string{"HOME": t.TempDir(), "VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": tok.Secret}, args...)
	}
	if r := as("add", "timer", "1h", "--for", "agent-a", "-q"); r.code != 0 {
		t.Errorf("add as the scoped token: exit %d: %s", r.code, r.stderr)
	}
	if r := as("add", "timer", "1h", "--for", "agent-c", "-q"); r.code == 0 {
		t.Errorf("add for another recipient succeeded: %q", r.stdout)
	}
	if r := as("token", "ls"); r.code == 0 {
		t.Errorf("token ls as a scoped token succeeded: %q", r.stdout)
	}
	r = d.vigil(t, "token", "revoke", tok.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "Revoked "+tok.ID) {
		t.Fatalf("token revoke: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := as("ls"); r.code != ExitUsage {
		t.Errorf("ls with a revoked token: exit %d, want %d (auth error): %s", r.code, ExitUsage, r.stderr)
	}
	if r := d.vigil(t, "token", "ls"); !strings.Contains(r.stdout, "No scoped tokens.") {
		t.Errorf("token ls after revoke = %q, want none (revoked ones only with --all)", r.stdout)
	}
	if r := d.vigil(t, "token", "ls", "--all"); !strings.Contains(r.stdout, tok.ID) {
		t.Errorf("token ls --all = %q, want the revoked token", r.stdout)
	}
}
