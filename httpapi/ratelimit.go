package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// Defaults of the registration rate limit, per scoped token.
const (
	// DefaultRegisterRate is how many registrations per second a scoped
	// token may make, on average.
	DefaultRegisterRate = 10.0
	// DefaultRegisterBurst is how many it may make at once.
	DefaultRegisterBurst = 100
	// maxBuckets bounds the limiter's memory; past it, idle buckets go.
	maxBuckets = 10_000
)

// limiter is a token bucket per key (a scoped token's id).
type limiter struct {
	rate  float64 // tokens per second; <= 0 disables
	burst float64
	mu    sync.Mutex
	b     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(max(burst, 1)), b: map[string]*bucket{}}
}

// allow takes one token from key's bucket at now, or reports how long
// until one is there.
func (l *limiter) allow(key string, now time.Time) (ok bool, retry time.Duration) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b[key]
	if b == nil {
		if len(l.b) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.b[key] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(l.burst, b.tokens+el*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// sweep drops buckets that have refilled: they hold nothing a new one
// would not.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.b {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.b, k)
		}
	}
	if len(l.b) >= maxBuckets {
		clear(l.b)
	}
}

// rateLimit refuses a scoped token's registration past its rate with 429
// rate_limited and Retry-After (whole seconds, at least 1). The admin is
// not limited.
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request) error {
	sc, scoped := vigil.ScopeFrom(r.Context())
	if !scoped {
		return nil
	}
	ok, retry := s.limits.allow(sc.TokenID, time.Now())
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(retry.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return vigil.Errorf(vigil.CodeRateLimited, "this token registers too fast: at most %g watches a second, %d at once; try again in %d s",
		s.limits.rate, int(s.limits.burst), secs)
}
