package vigil

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a Go duration ("90s", "1h30m") that may also use a
// day unit ("7d", "1d12h"). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if len(s) > 64 {
		return 0, fmt.Errorf("duration %.20q… is too long", s)
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 64)
		if err != nil || n > maxDays {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		days = time.Duration(n) * day
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a number and a unit, like 30s, 10m, 2h or 7d", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	if d > math.MaxInt64-days {
		return 0, fmt.Errorf("duration %q is too long", s)
	}
	return days + d, nil
}

const (
	day = 24 * time.Hour
	// maxDays is the most whole days a time.Duration holds.
	maxDays = uint64(math.MaxInt64 / int64(day))
)

// FormatDuration formats d compactly ("30s", "1h30m", "7d"), the inverse of
// ParseDuration.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	if d >= day {
		fmt.Fprintf(&b, "%dd", d/day)
		d %= day
		if d == 0 {
			return b.String()
		}
	}
	s := d.String()
	// time.Duration.String writes "1h0m0s"; trim zero units.
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	b.WriteString(s)
	return b.String()
}
