package vigil_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// FuzzParseDuration: any input either is refused or parses to a
// non-negative duration that FormatDuration spells so that it parses back
// to the same value.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "1h30m", "7d", "1d12h", "0s", "", "-1s", "99999d", "1.5h", "d", "5dd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := vigil.ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, want non-negative", s, d)
		}
		if d == 0 || d%time.Millisecond != 0 {
			return // FormatDuration spells whole milliseconds and up
		}
		back, err := vigil.ParseDuration(vigil.FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, vigil.FormatDuration(d), back, err)
		}
	})
}

// FuzzParseTime: an accepted time is UTC and survives FormatTime at
// millisecond precision.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-03-04T05:06:07.008Z", "2026-03-04T05:06:07+02:00", "", "2026-13-01T00:00:00Z", "0000-01-01T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := vigil.ParseTime(s)
		if err != nil || tm.IsZero() {
			return
		}
		if tm.Location() != time.UTC {
			t.Fatalf("ParseTime(%q) is in %v, want UTC", s, tm.Location())
		}
		if tm.Year() < 0 || tm.Year() > 9999 {
			return
		}
		back, err := vigil.ParseTime(vigil.FormatTime(tm))
		if err != nil || !back.Equal(tm.Truncate(time.Millisecond)) {
			t.Fatalf("ParseTime(FormatTime(%v)) = %v, %v", tm, back, err)
		}
	})
}
