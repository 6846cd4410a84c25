package proc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	var all bytes.Buffer
	for i := range 200_000 {
		fmt.Fprintf(&all, "%d\n", i)
	}
	tl := newTail(OutputTail)
	rng := rand.New(rand.NewPCG(1, 2))
	for rest := all.Bytes(); len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(3*OutputTail/2)) // chunks smaller and larger than the tail
		if _, err := tl.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
		if cap(tl.buf) > 4*OutputTail {
			t.Fatalf("tail buffer grew to %d bytes, want a bound near %d", cap(tl.buf), 2*OutputTail)
		}
	}
	want := all.Bytes()[all.Len()-OutputTail:]
	if got := tl.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("tail kept %d bytes ending %q, want the last %d ending %q", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
	}
	if tl.total != int64(all.Len()) {
		t.Errorf("tail counted %d bytes, want %d", tl.total, all.Len())
	}
}

// TestRunKeepsLastOutput prints over 1 MiB and checks that the run kept
// exactly its last 64 KiB.
func TestRunKeepsLastOutput(t *testing.T) {
	t.Parallel()
	r := Runner{KillGrace: 200 * time.Millisecond}
	res, err := r.run(context.Background(), Program{Shell: "seq 1 200000; seq 1 1000 >&2"}, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&all, "%d\n", i)
	}
	if all.Len() < 1<<20 {
		t.Fatalf("test output is only %d bytes", all.Len())
	}
	want := all.String()[all.Len()-OutputTail:]
	if got := res.stdout.String(); got != want {
		t.Errorf("kept %d bytes of stdout, want the last %d", len(got), len(want))
	}
	if res.code != 0 || res.ended != "" {
		t.Errorf("run = code %d ended %q, want exit 0", res.code, res.ended)
	}
	if !strings.HasSuffix(res.stderr.String(), "999\n1000\n") {
		t.Errorf("stderr tail = %q, want it to end with the last lines", res.stderr.String())
	}
}

// TestTailCutsOnARuneBoundary: output longer than the tail, cut inside a
// character, keeps whole characters only, so the text a run or a probe
// leaves is valid UTF-8 from its first byte (not a stray U+FFFD where
// the cut split a character).
func TestTailCutsOnARuneBoundary(t *testing.T) {
	t.Parallel()
	for _, r := range []string{"é", "€", "😀"} {
		for shift := range len(r) {
			tl := newTail(1024 + shift)
			_, _ = tl.Write([]byte(strings.Repeat(r, 2000)))
			got := tl.Bytes()
			if !utf8.Valid(got) || len(got) > 1024+shift || len(got) < 1024+shift-len(r)+1 {
				t.Errorf("tail of %q × 2000 kept in %d bytes = %d bytes starting %q, want whole characters only", r, 1024+shift, len(got), got[:4])
			}
		}
	}
	// Output that fits is kept as written, whatever it starts with.
	tl := newTail(16)
	_, _ = tl.Write([]byte("\x80abc"))
	if got := tl.String(); got != "\x80abc" {
		t.Errorf("tail of a short write = %q, want it whole", got)
	}
}
