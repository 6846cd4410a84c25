package engine_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// FuzzParseDeadline: a deadline asked for is an RFC 3339 time or a
// duration from now, resolved by vigil.ResolveDeadline as prepare does;
// any other input is refused with a coded error, never a panic, and an
// accepted deadline is in the future.
func FuzzParseDeadline(f *testing.F) {
	for _, s := range []string{"2h", "7d", "0s", "-1h", "2026-11-30T13:00:00Z", "2026-11-30T13:00:00.123456+01:00", "", "soon", "1d1d"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	spec := vigil.KindSpec{Every: 10 * time.Second}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := vigil.ResolveDeadline(vigil.KindHTTP, spec, s, time.Time{}, now, vigil.DefaultLimits())
		if err != nil {
			if vigil.ErrorCode(err) == vigil.CodeInternal {
				t.Fatalf("ResolveDeadline(%q) = %v, want a coded refusal", s, err)
			}
			return
		}
		if s != "" && !got.After(now) {
			t.Fatalf("ResolveDeadline(%q) = %v, want after %v", s, got, now)
		}
	})
}
