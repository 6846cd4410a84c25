package folder_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil/watcher/folder"
)

// advance moves the clock by d and runs what is due: the notifier's
// wakes, then the scheduler.
func (r *rig) advance(d time.Duration) { r.at(r.clock.Now().Sub(t0) + d) }

// drain forgets pokes already delivered.
func (r *rig) drain() {
	for {
		select {
		case <-r.pokes:
		default:
			return
		}
	}
}

// settleOut lets the settle window pass, in steps, until a report
// arrives; it returns the number of changed messages.
func (r *rig) settleOut(before int) int {
	r.t.Helper()
	for range 6 {
		r.advance(5 * time.Second)
		if n := len(r.changed()); n > before {
			return n
		}
	}
	r.t.Fatalf("no report after the settle window (still %d messages)", before)
	return 0
}

// TestEventsAndPollingReportAlike drives the same edits through a watch
// woken by file system events and one that falls back to polling (events
// forced off): both say the same, and each says how it is woken.
func TestEventsAndPollingReportAlike(t *testing.T) {
	t.Parallel()
	needInotify(t)
	type result struct {
		Summaries, Texts []string
	}
	run := func(t *testing.T, events bool) (result, string) {
		r := newRig(t, rigOpts{events: events, poll: !events})
		write(t, r.path("a.txt"), "alpha\n")
		write(t, r.path("sub", "b.txt"), "beta\n")
		w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"5s"}`)
		wake := r.get(w.ID).LastObservation.Facts["wake"].(string)
		look := func() {
			if events {
				r.poked(w.ID)
			} else {
				r.advance(folder.PollEvery)
			}
		}
		edits := []func(){
			func() { write(t, r.path("c.txt"), "gamma\n") },
			func() { write(t, r.path("a.txt"), "alpha two\n") },
			func() {
				if err := os.Remove(r.path("sub", "b.txt")); err != nil {
					t.Fatal(err)
				}
			},
		}
		n := 0
		for _, edit := range edits {
			r.drain()
			edit()
			look()
			n = r.settleOut(n)
		}
		var res result
		for _, m := range r.changed() {
			rep := messageReport(t, m)
			res.Summaries = append(res.Summaries, rep.Summary)
			res.Texts = append(res.Texts, rep.Text)
		}
		return res, wake
	}
	evRes, evWake := run(t, true)
	pollRes, pollWake := run(t, false)
	if diff := cmp.Diff(evRes, pollRes); diff != "" {
		t.Errorf("events and polling report differently (-events +polling):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"1 added", "1 edited", "1 removed"}, evRes.Summaries); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
	if evWake != "events" || !strings.HasPrefix(pollWake, "polling every 10s: ") {
		t.Errorf("wake facts: events %q, polling %q", evWake, pollWake)
	}
}

// TestNewSubfolderIsWatched: a folder created after the watch started is
// watched: a file written inside it wakes the watch and is reported.
func TestNewSubfolderIsWatched(t *testing.T) {
	t.Parallel()
	needInotify(t)
	r := newRig(t, rigOpts{events: true})
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"5s"}`)
	if wake := r.get(w.ID).LastObservation.Facts["wake"]; wake != "events" {
		t.Fatalf("wake = %v, want events", wake)
	}
	sub := r.path("later", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	r.poked(w.ID)
	if got := r.n.Watched(w.ID); !slices.Contains(got, sub) {
		t.Fatalf("watched %v, want %s among them", got, sub)
	}
	r.drain()
	write(t, filepath.Join(sub, "x.txt"), "inside\n")
	r.poked(w.ID)
	r.settleOut(0)
	rep := messageReport(t, r.changed()[0])
	if rep.Summary != "1 added" || missingLine(rep.Text, "+++ b/later/deeper/x.txt", "+inside") != "" {
		t.Errorf("report = %q\n%s", rep.Summary, rep.Text)
	}
}

// TestChangeBeforeRegistrationIsSeen: a file written after the first
// probe looked at the folder and before that probe's registration with the
// notifier watched it raises no event for the watch. The probe looks again
// once the folder is watched, so the file is part of the baseline, as a
// file written just before the look is: it is not reported, long after,
// with the next unrelated change (before, a later write reported "2
// added"; without one, the watch learnt of it only at its 30-minute look).
func TestChangeBeforeRegistrationIsSeen(t *testing.T) {
	t.Parallel()
	needInotify(t)
	var r *rig
	written := false
	r = newRig(t, rigOpts{events: true, beforeWatch: func() {
		if !written {
			written = true
			write(t, r.path("late.txt"), "late\n")
		}
	}})
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"5s"}`)
	if !written {
		t.Fatal("the probe never registered with the notifier")
	}
	r.drain()
	write(t, r.path("next.txt"), "next\n")
	r.poked(w.ID)
	r.settleOut(0)
	rep := messageReport(t, r.changed()[0])
	if rep.Summary != "1 added" || !slices.Equal(rep.Added, []string{"next.txt"}) {
		t.Errorf("report = %q, added %v; want only next.txt (late.txt was there before the watch was)", rep.Summary, rep.Added)
	}
}

// TestRestartReportsTheDowntimeOnce: a standing watch restarted on the
// same store keeps its baseline: it reports what changed while the
// daemon was down, once, against what it last reported, and nothing it
// had already reported.
func TestRestartReportsTheDowntimeOnce(t *testing.T) {
	t.Parallel()
	r1 := newRig(t, rigOpts{})
	write(t, r1.path("a.txt"), "v1\n")
	w := r1.register(`{"path":` + q(r1.root) + `,"standing":true,"settle":"20s"}`)
	write(t, r1.path("a.txt"), "v2\n")
	r1.at(10 * time.Second)
	r1.at(30 * time.Second)
	if msgs := r1.changed(); len(msgs) != 1 || missingLine(messageReport(t, msgs[0]).Text, "-v1", "+v2") != "" {
		t.Fatalf("before the restart: %d messages", len(msgs))
	}

	// The daemon stops; the folder changes; a new daemon starts.
	write(t, r1.path("a.txt"), "v3\n")
	write(t, r1.path("b.txt"), "new while down\n")
	r1.clock.Set(t0.Add(time.Hour))
	r2 := newRig(t, rigOpts{from: r1})
	r2.at(time.Hour)
	if n := len(r2.changed()); n != 1 {
		t.Fatalf("reported inside the settle window after the restart: %d messages", n)
	}
	r2.at(time.Hour + 20*time.Second)
	r2.at(time.Hour + 10*time.Minute)
	r2.at(2 * time.Hour)
	msgs := r2.changed()
	if len(msgs) != 2 {
		t.Fatalf("%d messages after the restart, want 2 (the downtime reported once)", len(msgs))
	}
	rep := messageReport(t, msgs[1])
	if rep.Summary != "1 added, 1 edited" || missingLine(rep.Text, "-v2", "+v3", "+new while down") != "" || strings.Contains(rep.Text, "v1") {
		t.Errorf("report after the restart = %q\n%s", rep.Summary, rep.Text)
	}
	if got := r2.get(w.ID); got.State != "pending" {
		t.Errorf("state %s after the restart, want pending", got.State)
	}
}

// TestKeptContentsFollowTheBaseline: the contents kept for diffs are the
// baseline's: a report keeps the new ones, the next probe lets go of the
// old, and a watch that ends lets go of all; Sweep removes what no
// pending watch owns.
func TestKeptContentsFollowTheBaseline(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	write(t, r.path("a.txt"), "v1\n")
	write(t, r.path("bin.dat"), "\x00\x01")
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"0"}`)
	kept := func() int {
		ents, _ := os.ReadDir(filepath.Join(r.blobs, w.ID))
		return len(ents)
	}
	if n := kept(); n != 1 {
		t.Fatalf("%d contents kept for the baseline, want 1 (the text file)", n)
	}
	write(t, r.path("a.txt"), "v2\n")
	r.at(10 * time.Second)
	if n := kept(); n != 2 {
		t.Fatalf("%d contents kept after a report, want 2 (old and new, until the new baseline is committed)", n)
	}
	r.at(20 * time.Second)
	if n := kept(); n != 1 {
		t.Fatalf("%d contents kept once the new baseline is in, want 1", n)
	}
	if err := os.MkdirAll(filepath.Join(r.blobs, "01STALEWATCH"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Sweep(func(id string) bool { return id == w.ID }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.blobs, "01STALEWATCH")); !os.IsNotExist(err) {
		t.Errorf("Sweep left a stale watch's contents: %v", err)
	}
	if kept() != 1 {
		t.Error("Sweep removed a pending watch's contents")
	}
	r.w.Forget(w.ID)
	if _, err := os.Stat(filepath.Join(r.blobs, w.ID)); !os.IsNotExist(err) {
		t.Errorf("Forget left the contents: %v", err)
	}
}
