package wire

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter reads an HTTP Retry-After header (RFC 9110 §10.2.3):
// whole seconds, or an HTTP date taken from now (a date past is a wait of
// zero). It reports false for an empty or malformed value. Callers bound
// the wait as they need.
func ParseRetryAfter(s string, now time.Time) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(maxRetryAfterSeconds))) * time.Second, true
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// maxRetryAfterSeconds keeps a wait in seconds within a time.Duration.
const maxRetryAfterSeconds = int64(1<<63-1) / int64(time.Second)
