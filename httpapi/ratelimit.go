package httpapi

import (
	"context"
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

// limiter is a token bucket per key (a scoped token's id), in memory or,
// with take, wherever take keeps it (the database replicas share).
type limiter struct {
	rate  float64 // tokens per second; <= 0 disables
	burst float64
	take  func(ctx context.Context, key string, rate float64, burst, n int, now time.Time) (bool, time.Duration, error)
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

// allowN takes n tokens from key's bucket at now, or none and reports how
// long until n are there. n is at most the burst (see allowRegisterN).
func (l *limiter) allowN(ctx context.Context, key string, now time.Time, n int) (ok bool, retry time.Duration, err error) {
	if l == nil || l.rate <= 0 {
		return true, 0, nil
	}
	if l.take != nil {
		return l.take(ctx, key, l.rate, int(l.burst), n, now)
	}
	ok, retry = l.allowMem(key, now, n)
	return ok, retry, nil
}

// allowMem is allowN on the buckets in memory.
func (l *limiter) allowMem(key string, now time.Time, n int) (ok bool, retry time.Duration) {
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
	need := float64(n)
	if b.tokens >= need {
		b.tokens -= need
		return true, 0
	}
	return false, time.Duration((need - b.tokens) / l.rate * float64(time.Second))
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
	secs, err := s.allowRegister(r.Context())
	if err != nil && secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	return err
}

// rateLimitN is rateLimit for a batch of n registrations.
func (s *Server) rateLimitN(w http.ResponseWriter, r *http.Request, n int) error {
	secs, err := s.allowRegisterN(r.Context(), n)
	if err != nil && secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	return err
}

// allowRegister takes one registration from the caller's bucket, or says
// how many whole seconds to wait.
func (s *Server) allowRegister(ctx context.Context) (int, error) {
	return s.allowRegisterN(ctx, 1)
}

// allowRegisterN takes n registrations (a batch's) from the caller's
// bucket at once, or none and says how many whole seconds to wait. A batch
// larger than the burst can never pass: it is refused with no wait.
func (s *Server) allowRegisterN(ctx context.Context, n int) (int, error) {
	sc, scoped := vigil.ScopeFrom(ctx)
	if !scoped {
		return 0, nil
	}
	if s.limits.rate > 0 && float64(n) > s.limits.burst {
		return 0, vigil.Errorf(vigil.CodeRateLimited, "this token may register at most %d watches at once, and this batch holds %d: split it", int(s.limits.burst), n)
	}
	ok, retry, err := s.limits.allowN(ctx, sc.TokenID, time.Now(), n)
	if err != nil {
		return 0, err
	}
	if ok {
		return 0, nil
	}
	secs := max(1, int(math.Ceil(retry.Seconds())))
	return secs, vigil.Errorf(vigil.CodeRateLimited, "this token registers too fast: at most %g watches a second, %d at once; try again in %d s",
		s.limits.rate, int(s.limits.burst), secs)
}

// Limited returns svc with Register held to the same per-token rate, and
// the same buckets, as POST /v1/watches: for surfaces mounted beside the
// API (the MCP tools at /mcp), so that no surface is a way around the
// limit. Past it, Register returns rate_limited, the wait in its sentence.
func (s *Server) Limited(svc vigil.Service) vigil.Service { return limited{Service: svc, s: s} }

type limited struct {
	vigil.Service
	s *Server
}

func (l limited) Register(ctx context.Context, r vigil.RegisterRequest) (*vigil.Watch, error) {
	if _, err := l.s.allowRegister(ctx); err != nil {
		return nil, err
	}
	return l.Service.Register(ctx, r)
}

func (l limited) RegisterBatch(ctx context.Context, rs []vigil.RegisterRequest) ([]vigil.BatchResult, error) {
	if _, err := l.s.allowRegisterN(ctx, len(rs)); err != nil {
		return nil, err
	}
	return l.Service.RegisterBatch(ctx, rs)
}
