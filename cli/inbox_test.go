package cli

import (
	"strings"
	"testing"
)

// TestInboxAcksOnlyWhatItWrote holds that inbox marks messages read only
// once they are written out: with stdout failing (as > /dev/full does),
// in a table or as JSON, it exits 1 and the messages stay unread; written,
// they are read; --no-ack leaves them unread.
func TestInboxAcksOnlyWhatItWrote(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	env := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token(), "USER": "tester"}
	if r := d.vigil(t, "note", "--for", "amy", "deploy finished"); r.code != 0 {
		t.Fatalf("note: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"inbox", "--for", "amy"}, {"inbox", "--for", "amy", "--json"}} {
		r := cliRun{vars: env, stdout: failWriter{}}.run(t.Context(), args...)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "cannot write the messages, so they stay unread: write /dev/stdout: no space left on device") {
			t.Errorf("vigil %v with stdout failing: exit %d, stderr %q; want %d and why", args, r.code, r.stderr, ExitFailed)
		}
	}
	r := d.vigil(t, "inbox", "--for", "amy", "--no-ack")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Fatalf("inbox --no-ack after failed writes: exit %d, stdout %q; want the message, still unread", r.code, r.stdout)
	}
	r = d.vigil(t, "inbox", "--for", "amy")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Errorf("inbox after --no-ack: exit %d, stdout %q; want the message, still unread", r.code, r.stdout)
	}
	r = d.vigil(t, "inbox", "--for", "amy")
	if r.code != 0 || r.stdout != "No new messages for amy.\n" {
		t.Errorf("inbox after a written read: exit %d, stdout %q; want nothing new", r.code, r.stdout)
	}
}

// TestNoticeUnwrittenStaysUnread holds that notice marks messages read
// only once its block is written: with stdout failing it still exits 0
// (it never fails a turn), says why on stderr, and the next notice shows
// the messages.
func TestNoticeUnwrittenStaysUnread(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.vigil(t, "note", "--for", "amy", "deploy finished"); r.code != 0 {
		t.Fatalf("note: exit %d %s", r.code, r.stderr)
	}
	env := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token(), "USER": "tester"}
	r := cliRun{vars: env, stdout: failWriter{}}.run(t.Context(), "notice", "--for", "amy")
	if r.code != 0 || r.stderr != "vigil notice: cannot write the messages, so they stay unread: write /dev/stdout: no space left on device\n" {
		t.Errorf("notice with stdout failing: exit %d, stderr %q; want 0 and one line saying why", r.code, r.stderr)
	}
	r = d.vigil(t, "notice", "--for", "amy")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Errorf("the next notice: exit %d, stdout %q; want the message, unread", r.code, r.stdout)
	}
	if r := d.vigil(t, "notice", "--for", "amy"); r.stdout != "" {
		t.Errorf("notice after a written one: %q, want nothing", r.stdout)
	}
}
