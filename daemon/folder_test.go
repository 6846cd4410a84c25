package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
)

// TestFolderWatchEndToEnd: a standing folder watch on a running daemon is
// woken by a file system event, reports the edit as a changed message
// with its diff, keeps the file's content in the data dir for the next
// diff, and stays pending.
func TestFolderWatchEndToEnd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "plan.md"), []byte("step one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, testConfig(dataDir, root))
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-f", Observe: true,
		Predicate: json.RawMessage(`{"path":` + quote(root) + `,"standing":true,"settle":"0"}`)})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if !w.Standing || w.LastObservation == nil || w.LastObservation.Verdict != vigil.VerdictPending {
		t.Fatalf("registered %+v, want a standing watch with its baseline", w)
	}
	if wake, _ := w.LastObservation.Facts["wake"].(string); wake != "events" && !strings.HasPrefix(wake, "polling") {
		t.Fatalf("wake = %q", wake)
	}
	// Written whole and renamed into place: with settle 0 every change is
	// reported, and a truncate-then-write would be two changes.
	tmp := filepath.Join(t.TempDir(), "plan.md")
	if err := os.WriteFile(tmp, []byte("step one\nstep two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, "plan.md")); err != nil {
		t.Fatal(err)
	}
	// An event (or, without inotify, the 10 s poll) wakes the watch.
	zero := int64(0)
	deadline := time.Now().Add(30 * time.Second)
	var got []*vigil.Message
	for len(got) == 0 && time.Now().Before(deadline) {
		page, err := c.Messages(t.Context(), vigil.MessagesRequest{Recipient: "agent-f", After: &zero, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got = page.Messages
	}
	if len(got) != 1 || got[0].Type != vigil.MessageChanged || !strings.Contains(got[0].Text, "1 edited: plan.md") {
		t.Fatalf("mailbox = %+v, want one changed message about plan.md", got)
	}
	if !strings.Contains(string(got[0].Data), `+step two`) {
		t.Errorf("message data lacks the diff: %s", got[0].Data)
	}
	if ents, err := os.ReadDir(filepath.Join(dataDir, daemon.FolderDir, w.ID)); err != nil || len(ents) == 0 {
		t.Errorf("no kept contents under data_dir/%s/%s: %v", daemon.FolderDir, w.ID, err)
	}
	if now, err := c.Watch(t.Context(), w.ID); err != nil || now.State != vigil.StatePending {
		t.Errorf("standing watch after a report: %+v, %v; want pending", now, err)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
