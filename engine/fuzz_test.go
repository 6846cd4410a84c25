package engine

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// FuzzParseDeadline: a deadline is an RFC 3339 time or a duration from
// now; any other input is refused with a coded error, never a panic, and
// an accepted duration is in the future.
func FuzzParseDeadline(f *testing.F) {
	for _, s := range []string{"2h", "7d", "0s", "-1h", "2026-11-30T13:00:00Z", "2026-11-30T13:00:00.123456+01:00", "", "soon", "1d1d"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseDeadline(s, now)
		if err != nil {
			if vigil.ErrorCode(err) == vigil.CodeInternal {
				t.Fatalf("parseDeadline(%q) = %v, want a coded refusal", s, err)
			}
			return
		}
		if _, perr := vigil.ParseTime(s); perr != nil && !got.After(now) {
			t.Fatalf("parseDeadline(%q) = %v, want after %v", s, got, now)
		}
	})
}
