package proc

import (
	"os"
	"runtime"
	"slices"
	"testing"
)

// TestSelfReaperOnlyWhenServed: a program is started as its own reaper
// only once it said it serves `reap` (ServeReap, the vigil binary's
// main): a program that embeds the daemon would take the argument as its
// own. Not parallel: ServeReap is for the whole process.
func TestSelfReaperOnlyWhenServed(t *testing.T) {
	if got := SelfReaper(); got != nil {
		t.Fatalf("SelfReaper = %q before ServeReap; want nil", got)
	}
	ServeReap()
	t.Cleanup(func() { servesReap.Store(false) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{exe, "reap"}
	if runtime.GOOS != "linux" {
		want = nil // no child subreapers: nothing to run under
	}
	if got := SelfReaper(); !slices.Equal(got, want) {
		t.Fatalf("SelfReaper = %q after ServeReap; want %q", got, want)
	}
}
