package folder_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

// TestBaselineThenReport: the first look records the folder silently;
// an added, an edited and a removed file wait out the settle window and
// reach one "changed" message whose report has the summary line and the
// diff lines of each.
func TestBaselineThenReport(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	write(t, r.path("a.txt"), "one\nold line\nthree\n")
	write(t, r.path("b.txt"), "gone soon\n")
	w := r.register(`{"path":` + q(r.root) + `,"standing":true}`)
	if !w.Standing || !w.Deadline.IsZero() {
		t.Fatalf("standing folder watch: standing %v deadline %v", w.Standing, w.Deadline)
	}
	if got := r.get(w.ID).LastObservation; got == nil || got.Verdict != vigil.VerdictPending || !strings.Contains(got.Summary, "2 files watched") {
		t.Fatalf("baseline observation = %+v", got)
	}
	r.at(10 * time.Second)
	if msgs := r.changed(); len(msgs) != 0 {
		t.Fatalf("the baseline mailed %d messages", len(msgs))
	}

	write(t, r.path("new.txt"), "hello\n")
	write(t, r.path("a.txt"), "one\nnew line\nthree\n")
	if err := os.Remove(r.path("b.txt")); err != nil {
		t.Fatal(err)
	}
	r.at(20 * time.Second) // sees the burst
	r.at(30 * time.Second) // 10s still: settling
	if msgs := r.changed(); len(msgs) != 0 {
		t.Fatalf("reported inside the settle window: %q", msgs[0].Text)
	}
	r.at(40 * time.Second) // still for 20s
	msgs := r.changed()
	if len(msgs) != 1 {
		t.Fatalf("%d changed messages, want 1", len(msgs))
	}
	rep := messageReport(t, msgs[0])
	if rep.Summary != "1 added, 1 edited, 1 removed" {
		t.Errorf("summary = %q", rep.Summary)
	}
	if want := "changed: 1 added, 1 edited, 1 removed: a.txt, b.txt, new.txt"; !strings.Contains(msgs[0].Text, want) {
		t.Errorf("message text = %q, want it to hold %q", msgs[0].Text, want)
	}
	if !strings.HasPrefix(rep.Text, "1 added, 1 edited, 1 removed\n") {
		t.Errorf("report does not start with its summary line:\n%s", rep.Text)
	}
	if l := missingLine(rep.Text,
		"--- a/a.txt", "+++ b/a.txt", "-old line", "+new line", " one",
		"--- a/b.txt", "+++ /dev/null", "-gone soon",
		"--- /dev/null", "+++ b/new.txt", "+hello"); l != "" {
		t.Errorf("report lacks the line %q:\n%s", l, rep.Text)
	}
	if diff := cmp.Diff(reportOf{Summary: rep.Summary, Text: rep.Text, Added: []string{"new.txt"}, Edited: []string{"a.txt"}, Removed: []string{"b.txt"}}, rep); diff != "" {
		t.Errorf("report names (-want +got):\n%s", diff)
	}
	// Nothing more changed: nothing more is said.
	r.at(50 * time.Second)
	r.at(10 * time.Minute)
	if n := len(r.changed()); n != 1 {
		t.Fatalf("%d messages after a quiet spell, want still 1", n)
	}
}

// TestBurstIsOneReport: four writes inside the settle window make one
// report; with settle 0 each change is its own report.
func TestBurstIsOneReport(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		settle string
		want   int
	}{{`"20s"`, 1}, {`"0"`, 4}} {
		t.Run("settle "+tt.settle, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, rigOpts{})
			w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":` + tt.settle + `}`)
			for i, name := range []string{"a", "b", "c", "a"} {
				write(t, r.path(name+".txt"), strings.Repeat("x", i+1))
				// As an event would: the watch is poked and looks at once.
				r.clock.Set(t0.Add(time.Duration(2*i+2) * time.Second))
				r.sched.Poke(w.ID)
				r.eng.Tick(r.ctx, r.clock.Now())
			}
			r.at(8*time.Second + 19*time.Second)
			if tt.want == 1 && len(r.changed()) != 0 {
				t.Fatal("reported before the folder was still for 20s")
			}
			r.at(8*time.Second + 20*time.Second)
			r.at(5 * time.Minute)
			msgs := r.changed()
			if len(msgs) != tt.want {
				for _, m := range msgs {
					t.Log(m.Text)
				}
				t.Fatalf("%d reports, want %d", len(msgs), tt.want)
			}
			if tt.want == 1 {
				if got := messageReport(t, msgs[0]).Summary; got != "3 added" {
					t.Errorf("summary = %q, want 3 added", got)
				}
			} else {
				var got []string
				for _, m := range msgs {
					got = append(got, messageReport(t, m).Summary)
				}
				if diff := cmp.Diff([]string{"1 added", "1 added", "1 added", "1 edited"}, got); diff != "" {
					t.Errorf("summaries (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestPatternAndSingleFile: *.go ignores notes.md; a watch on one file
// names the file.
func TestPatternAndSingleFile(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	write(t, r.path("notes.md"), "draft\n")
	goWatch := r.register(`{"path":` + q(r.root) + `,"pattern":"*.go","standing":true,"settle":"0"}`)
	fileWatch := r.register(`{"path":` + q(r.path("notes.md")) + `,"standing":true,"settle":"0"}`)
	write(t, r.path("notes.md"), "draft two\n")
	r.at(10 * time.Second)
	msgs := r.changed()
	if len(msgs) != 1 || msgs[0].WatchID != fileWatch.ID {
		t.Fatalf("after editing notes.md: %d messages (want one, from the file watch)", len(msgs))
	}
	if want := "notes.md edited"; !strings.Contains(msgs[0].Text, want) {
		t.Errorf("file watch message = %q, want it to name the file: %q", msgs[0].Text, want)
	}
	write(t, r.path("sub", "main.go"), "package main\n")
	r.at(20 * time.Second)
	msgs = r.changed()
	if len(msgs) != 2 || msgs[1].WatchID != goWatch.ID {
		t.Fatalf("after adding sub/main.go: %d messages, want a second from the *.go watch", len(msgs))
	}
	if rep := messageReport(t, msgs[1]); rep.Summary != "1 added" || strings.Contains(rep.Text, "notes.md") {
		t.Errorf("*.go report = %q\n%s", rep.Summary, rep.Text)
	}
}

// TestOutsideRootsAndEscapingSymlink: a folder outside the roots is
// refused and nothing is registered; a symlink inside the folder that
// points outside the roots is not followed.
func TestOutsideRootsAndEscapingSymlink(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	_, err := r.eng.Register(r.ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-1",
		Predicate: []byte(`{"path":` + q(r.outside) + `}`)})
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "VIGIL_ROOTS") {
		t.Fatalf("Register(outside) = %v, want watch_unobservable naming VIGIL_ROOTS", err)
	}
	if page, _ := r.eng.Watches(r.ctx, vigil.ListRequest{}); len(page.Watches) != 0 {
		t.Fatalf("a refused watch was registered: %d watches", len(page.Watches))
	}

	write(t, r.outside+"/secret.txt", "s3cret\n")
	if err := os.Symlink(r.outside+"/secret.txt", r.path("leak.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, r.path("in.txt"), "inside\n")
	write(t, r.path("target.txt"), "linked inside\n")
	if err := os.Symlink(r.path("target.txt"), r.path("ok-link.txt")); err != nil {
		t.Fatal(err)
	}
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"0"}`)
	facts := r.get(w.ID).LastObservation.Facts
	files, _ := facts["files"].(map[string]any)
	if _, ok := files["leak.txt"]; ok {
		t.Errorf("the escaping symlink is tracked: %v", files)
	}
	if _, ok := files["ok-link.txt"]; !ok {
		t.Errorf("a symlink inside the roots is not tracked: %v", files)
	}
	if nf, _ := facts["not_followed"].([]any); len(nf) != 1 || nf[0] != "leak.txt" {
		t.Errorf("not_followed = %v, want [leak.txt]", facts["not_followed"])
	}
	write(t, r.outside+"/secret.txt", "s3cret changed\n")
	r.at(10 * time.Second)
	if n := len(r.changed()); n != 0 {
		t.Fatalf("a change outside the roots was reported (%d messages)", n)
	}
	write(t, r.path("in.txt"), "inside, edited\n")
	r.at(20 * time.Second)
	msgs := r.changed()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	if rep := messageReport(t, msgs[0]); strings.Contains(rep.Text, "s3cret") || !strings.Contains(rep.Text, "not followed") {
		t.Errorf("report leaks the outside file or does not say it was not followed:\n%s", rep.Text)
	}
}

// TestLargeFileBySize: a file over max_file_bytes is reported as a size
// change, without a diff.
func TestLargeFileBySize(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	write(t, r.path("big.log"), strings.Repeat("a\n", 100))
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"0","max_file_bytes":100}`)
	if f := r.get(w.ID).LastObservation.Facts["files"].(map[string]any)["big.log"].(string); !strings.Contains(f, " s") {
		t.Fatalf("big.log tracked as %q, want by size alone", f)
	}
	write(t, r.path("big.log"), strings.Repeat("b\n", 150))
	r.at(10 * time.Second)
	msgs := r.changed()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	rep := messageReport(t, msgs[0])
	if !strings.Contains(rep.Text, "big.log edited: 200 B → 300 B") || strings.Contains(rep.Text, "+++") || strings.Contains(rep.Text, "+b") {
		t.Errorf("report of a large file:\n%s", rep.Text)
	}
}

// TestReviewer: the reviewer gets the report on stdin and its output
// lands in the message; a failing reviewer still moves the baseline, so
// the change is not reported again.
func TestReviewer(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{allowExec: true})
	got := r.outside + "/stdin"
	flag := r.outside + "/fail"
	w := r.register(`{"path":` + q(r.root) + `,"standing":true,"settle":"0","on_change":{"shell":` +
		q(`cat > `+got+`; if [ -e `+flag+` ]; then echo broken >&2; exit 3; fi; echo "LGTM: $VIGIL_WATCH_ID"`) + `}}`)
	write(t, r.path("a.txt"), "first\n")
	r.at(10 * time.Second)
	msgs := r.changed()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	rep := messageReport(t, msgs[0])
	stdin, err := os.ReadFile(got)
	if err != nil || string(stdin) != rep.Text {
		t.Errorf("reviewer stdin = %q (%v), want the report %q", stdin, err, rep.Text)
	}
	if rep.Review["output"] != "LGTM: "+w.ID || rep.Review["exit_code"] != 0.0 {
		t.Errorf("review = %v", rep.Review)
	}
	if want := "review: LGTM: " + w.ID; !strings.Contains(msgs[0].Text, want) {
		t.Errorf("message text = %q, want %q in it", msgs[0].Text, want)
	}

	write(t, flag, "")
	write(t, r.path("a.txt"), "second\n")
	r.at(20 * time.Second)
	r.at(30 * time.Second)
	r.at(5 * time.Minute)
	msgs = r.changed()
	if len(msgs) != 2 {
		t.Fatalf("%d messages after a failing review, want 2 (reported once)", len(msgs))
	}
	rep = messageReport(t, msgs[1])
	if rep.Review["exit_code"] != 3.0 || rep.Review["stderr"] != "broken" || !strings.Contains(msgs[1].Text, "the reviewer exited 3") {
		t.Errorf("failed review = %v, text %q", rep.Review, msgs[1].Text)
	}
	if l := missingLine(rep.Text, "-first", "+second"); l != "" {
		t.Errorf("report lacks %q:\n%s", l, rep.Text)
	}
	// Why shows the newest report; the older message stays.
	last := observationReport(t, r.get(w.ID).LastObservation)
	if !strings.Contains(last.Text, "+second") {
		t.Errorf("the last observation carries the report %q, want the newest", last.Summary)
	}
}

// TestReviewerNeedsExec: on_change is refused while exec is off.
func TestReviewerNeedsExec(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	_, err := r.eng.Register(r.ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-1",
		Predicate: []byte(`{"path":` + q(r.root) + `,"on_change":["cat"]}`)})
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "--allow-exec") {
		t.Fatalf("Register(on_change) = %v, want watch_unobservable naming --allow-exec", err)
	}
}

// TestOneShotFires: a one-shot folder watch fires on its first settled
// burst, with the report in its outcome.
func TestOneShotFires(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	w := r.register(`{"path":` + q(r.path("docs")) + `,"settle":"5s"}`)
	if w.Standing || w.Deadline.IsZero() {
		t.Fatalf("one-shot watch: standing %v, deadline %v", w.Standing, w.Deadline)
	}
	if s := r.get(w.ID).LastObservation.Summary; !strings.Contains(s, "does not exist yet") {
		t.Errorf("baseline of a missing folder = %q", s)
	}
	write(t, r.path("docs", "guide.md"), "# Guide\n")
	r.at(10 * time.Second)
	r.at(20 * time.Second)
	got := r.get(w.ID)
	if got.State != vigil.StateFired || got.Outcome == nil {
		t.Fatalf("state %s, want fired", got.State)
	}
	if rep := observationReport(t, got.Outcome.Observation); rep.Summary != "1 added" || missingLine(rep.Text, "+# Guide") != "" {
		t.Errorf("outcome report = %q\n%s", rep.Summary, rep.Text)
	}
	if !strings.Contains(got.Outcome.Sentence, "1 added: guide.md") {
		t.Errorf("outcome sentence = %q", got.Outcome.Sentence)
	}
	if _, err := os.Stat(r.blobs + "/" + w.ID); !os.IsNotExist(err) {
		t.Errorf("a fired watch's kept contents are still there: %v", err)
	}
}

// TestUnchangedFolderWritesNothing: probes of a still folder write
// nothing (the facts are deterministic).
func TestUnchangedFolderWritesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOpts{})
	for i := range 20 {
		write(t, r.path("d", string(rune('a'+i))+".txt"), strings.Repeat("line\n", i))
	}
	w := r.register(`{"path":` + q(r.root) + `,"standing":true}`)
	first := r.get(w.ID).LastObservation
	for i := 1; i <= 30; i++ {
		r.at(time.Duration(i) * 10 * time.Second)
	}
	if got := r.get(w.ID).LastObservation; !got.At.Equal(first.At) {
		t.Fatalf("an unchanged folder wrote a new observation at %v", got.At)
	}
}
