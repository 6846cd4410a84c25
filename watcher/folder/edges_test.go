package folder_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMaxFilesNeverReportsAFileThatIsThereAsRemoved: past max_files only
// what is known to have changed is reported. Adding a.txt in front of
// b.txt and c.txt with max_files 2 pushes c.txt out of the tracked set,
// which is not its removal; removing a.txt again lets c.txt back in,
// which is not its addition.
func TestMaxFilesNeverReportsAFileThatIsThereAsRemoved(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	write(t, r.path("b.txt"), "b\n")
	write(t, r.path("c.txt"), "c\n")
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"0","max_files":2}`)

	step := 10 * time.Second
	now := step
	report := func(what string) reportOf {
		t.Helper()
		before := len(r.changed())
		r.at(now)
		now += step
		msgs := r.changed()
		if len(msgs) != before+1 {
			t.Fatalf("%s: %d new reports, want 1", what, len(msgs)-before)
		}
		return messageReport(t, msgs[len(msgs)-1])
	}

	write(t, r.path("a.txt"), "a\n")
	rep := report("a.txt added")
	if diff := cmp.Diff(reportOf{Summary: "1 added", Text: rep.Text, Added: []string{"a.txt"}}, rep); diff != "" {
		t.Errorf("adding a.txt in front of a full folder (-want +got):\n%s", diff)
	}
	if !strings.Contains(rep.Text, "files from c.txt on are not watched") {
		t.Errorf("the report does not say where the look stopped:\n%s", rep.Text)
	}
	r.at(now) // a quiet look: the pending observation names the bound
	now += step
	if sum := r.get(w.ID).LastObservation.Summary; !strings.Contains(sum, "2 files watched (files from c.txt on are not watched") {
		t.Errorf("the observation says %q, want the bound named", sum)
	}

	write(t, r.path("b.txt"), "b, edited\n")
	rep = report("b.txt edited")
	if diff := cmp.Diff(reportOf{Summary: "1 edited", Text: rep.Text, Edited: []string{"b.txt"}}, rep); diff != "" {
		t.Errorf("editing b.txt (-want +got):\n%s", diff)
	}

	if err := os.Remove(r.path("a.txt")); err != nil {
		t.Fatal(err)
	}
	rep = report("a.txt removed")
	if diff := cmp.Diff(reportOf{Summary: "1 removed", Text: rep.Text, Removed: []string{"a.txt"}}, rep); diff != "" {
		t.Errorf("removing a.txt lets c.txt back in (-want +got):\n%s", diff)
	}

	// c.txt is tracked again: its edit is seen.
	write(t, r.path("c.txt"), "c, edited\n")
	rep = report("c.txt edited")
	if diff := cmp.Diff(reportOf{Summary: "1 edited", Text: rep.Text, Edited: []string{"c.txt"}}, rep); diff != "" {
		t.Errorf("editing c.txt (-want +got):\n%s", diff)
	}
	// A file past the bound, in a subfolder that sorts after it.
	write(t, r.path("d", "x.txt"), "x\n")
	r.at(now)
	if n := len(r.changed()); n != 4 {
		t.Errorf("a file added past max_files made %d reports in all, want still 4", n)
	}
}

// TestBurstThatNeverGoesQuiet: a folder written every 10s never stays
// still for settle, yet each max_wait a report goes out and the window
// starts again.
func TestBurstThatNeverGoesQuiet(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"20s","max_wait":"1m"}`)
	for i := 1; i <= 15; i++ { // a write every 10s, from 10s to 150s
		write(t, r.path(fmt.Sprintf("f%02d.txt", i)), "x\n")
		r.clock.Set(t0.Add(time.Duration(i) * 10 * time.Second))
		r.sched.Poke(w.ID)
		r.eng.Tick(r.ctx, r.clock.Now())
		want := 0
		switch {
		case i >= 14: // the second burst began at 80s
			want = 2
		case i >= 7: // the first began at 10s
			want = 1
		}
		if got := len(r.changed()); got != want {
			t.Fatalf("at %ds: %d reports, want %d", i*10, got, want)
		}
	}
	msgs := r.changed()
	if got := messageReport(t, msgs[0]).Summary; got != "7 added" {
		t.Errorf("first report %q, want the 7 files of the first minute", got)
	}
	if got := messageReport(t, msgs[1]).Summary; got != "7 added" {
		t.Errorf("second report %q, want the 7 files since", got)
	}
}
