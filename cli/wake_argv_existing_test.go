package cli

import (
	"strings"
	"testing"
	"time"
)

// TestAddWakeArgvOnExisting: "vigil add --wake-argv" for a condition already
// pending for the recipient with ANOTHER argv template (another agent, another
// session) must not be told that the pending watch "resumes that session"
// and to cancel it to change the options: cancelling would take the other
// session's wake away. It is told, as for --wake, that it resumes another.
func TestAddWakeArgvOnExisting(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	at := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	add := func(args ...string) result {
		t.Helper()
		r := d.vigil(t, append([]string{"add", "timer", "--at", at, "--for", "wake-argv-dup"}, args...)...)
		if r.code != 0 {
			t.Fatalf("add %q: %d %s", args, r.code, r.stderr)
		}
		return r
	}
	add("-q", "--wake-argv", `["agent-a", "--resume", "session-a", "{sentence}"]`)
	r := add("--wake-argv", `["agent-b", "--resume", "session-b", "{sentence}"]`)
	if !strings.Contains(r.stdout, "The wake was NOT registered") {
		t.Fatalf("stdout does not say the wake was not registered:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "It resumes that session") || !strings.Contains(r.stdout, "instead") {
		t.Errorf("a pending watch that runs another argv template is described as resuming the session asked for:\n%s", r.stdout)
	}
}
