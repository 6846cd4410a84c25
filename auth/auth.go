// Package auth keeps vigil's scoped API tokens (SPEC §9). It makes them
// (the plaintext, "vgl_" and 32 random bytes in base64url, is shown once;
// only its SHA-256 is kept), lists and revokes them for the admin
// (vigil.TokenService), authenticates bearer tokens for httpapi behind a
// short cache, and re-checks before each probe that the token that made a
// watch is still valid, so that revoking a token cancels its watches.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// Defaults and bounds; each lives here only.
const (
	// DefaultCacheTTL is how long a looked-up token is trusted without
	// reading the store again. Revocation through this Service takes
	// effect at once; a change made behind its back (another process on
	// the same database) within DefaultCacheTTL.
	DefaultCacheTTL = 2 * time.Second
	// MaxRecipients bounds the recipients of one token.
	MaxRecipients = 64
	// secretBytes is how many random bytes a token's plaintext holds.
	secretBytes = 32
	// maxCached bounds the cache; past it, the cache starts afresh.
	maxCached = 4096
)

// ReasonRevoked is the outcome reason of a watch cancelled because the
// token that made it was revoked or expired.
const ReasonRevoked = "revoked"

// Config configures a Service. Zero fields take defaults.
type Config struct {
	// Store keeps the tokens. Required.
	Store vigil.TokenStore
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	// NewIDFunc makes token ids; nil makes "tok_" and a ULID.
	NewIDFunc func() string
	// CacheTTL (default DefaultCacheTTL); negative disables the cache.
	CacheTTL time.Duration
	// MaxNameBytes bounds a recipient name (default
	// vigil.DefaultLimits().MaxNameBytes).
	MaxNameBytes int
}

// Service implements vigil.TokenService and authenticates tokens. Make it
// with New.
type Service struct {
	store   vigil.TokenStore
	now     func() time.Time
	newID   func() string
	ttl     time.Duration
	maxName int
	mu      sync.Mutex
	byHash  map[string]cached
	byID    map[string]cached
	// gen counts forgets: a lookup caches what it read only if no forget
	// ran since it began, so a row read before a revocation committed is
	// never cached after the revocation dropped the old one.
	gen uint64
}

type cached struct {
	tok *vigil.Token
	at  time.Time
}

var _ vigil.TokenService = (*Service)(nil)

// New returns a Service over cfg.Store.
func New(cfg Config) *Service {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = func() string { return "tok_" + strings.ToLower(ulid.Make().String()) }
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.MaxNameBytes <= 0 {
		cfg.MaxNameBytes = vigil.DefaultLimits().MaxNameBytes
	}
	return &Service{
		store: cfg.Store, newID: cfg.NewIDFunc, ttl: cfg.CacheTTL, maxName: cfg.MaxNameBytes,
		now:    func() time.Time { return cfg.NowFunc().UTC().Truncate(time.Millisecond) },
		byHash: map[string]cached{}, byID: map[string]cached{},
	}
}

// errNotFound answers a scoped caller of the admin's methods: as if
// nothing were there.
var errNotFound = &vigil.Error{Code: vigil.CodeNotFound, Message: "not found"}

func adminOnly(ctx context.Context) error {
	if _, scoped := vigil.ScopeFrom(ctx); scoped {
		return errNotFound
	}
	return nil
}

// CreateToken implements vigil.TokenService.
func (s *Service) CreateToken(ctx context.Context, r vigil.TokenCreateRequest) (*vigil.Token, error) {
	if err := adminOnly(ctx); err != nil {
		return nil, err
	}
	now := s.now()
	if len(r.Recipients) == 0 {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipients", "a token acts for at least one recipient")
	}
	if len(r.Recipients) > MaxRecipients {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipients", "a token acts for at most %d recipients", MaxRecipients)
	}
	for _, name := range r.Recipients {
		if err := vigil.ValidName("recipients", name, s.maxName); err != nil {
			return nil, err
		}
	}
	for _, k := range r.Kinds {
		if _, ok := kinds.Lookup(k); !ok {
			return nil, vigil.FieldErrorf(vigil.CodeUnknownKind, "kinds", "unknown kind %.40q", string(k))
		}
	}
	repos, err := repoPatterns(r.Repos)
	if err != nil {
		return nil, err
	}
	var expires time.Time
	if r.Expires != "" {
		var err error
		if expires, err = parseExpires(r.Expires, now); err != nil {
			return nil, err
		}
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	t := &vigil.Token{
		ID: s.newID(), Hash: vigil.HashToken(secret), Recipients: slices.Compact(slices.Sorted(slices.Values(r.Recipients))),
		Kinds: slices.Compact(slices.Sorted(slices.Values(r.Kinds))), Repos: repos, Exec: r.Exec, CreatedAt: now, ExpiresAt: expires,
	}
	if len(t.Kinds) == 0 {
		t.Kinds = nil
	}
	if err := s.store.TokenCreate(ctx, vigil.TokenCreateParams{Token: t}); err != nil {
		return nil, err
	}
	t.Secret = secret
	return t, nil
}

// repoPatterns checks a token's repos scope (forge.ParseRepoPattern, at
// most forge.MaxRepoPatterns) and returns it lowercased, sorted and
// without repeats; nil for none (any repository).
func repoPatterns(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > forge.MaxRepoPatterns {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "repos", "a token names at most %d repository patterns; this one names %d", forge.MaxRepoPatterns, len(in))
	}
	out := make([]string, 0, len(in))
	for i, p := range in {
		c, err := forge.ParseRepoPattern(p)
		if err != nil {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, fmt.Sprintf("repos[%d]", i), "repos[%d] %.80q %v", i, p, err)
		}
		out = append(out, c)
	}
	return slices.Compact(slices.Sorted(slices.Values(out))), nil
}

// parseExpires reads a duration from now or an RFC 3339 instant.
func parseExpires(v string, now time.Time) (time.Time, error) {
	t, err := vigil.ParseTime(v)
	if err != nil {
		d, derr := vigil.ParseDuration(v)
		if derr != nil {
			return time.Time{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "expires", "expires must be a duration like 30d or an RFC 3339 time: %v", derr)
		}
		t = now.Add(d)
	}
	// Truncated as it is kept before it is compared: an instant within
	// the current millisecond would be kept as now, a token dead at birth.
	t = t.Truncate(time.Millisecond)
	if !t.After(now) {
		return time.Time{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "expires", "expires must be in the future")
	}
	return t, nil
}

func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return vigil.TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Tokens implements vigil.TokenService.
func (s *Service) Tokens(ctx context.Context, all bool) ([]*vigil.Token, error) {
	if err := adminOnly(ctx); err != nil {
		return nil, err
	}
	return s.store.TokenList(ctx, vigil.TokenListParams{IncludeRevoked: all})
}

// RevokeToken implements vigil.TokenService. The token stops working at
// once for requests, and its watches are cancelled before their next
// probe.
func (s *Service) RevokeToken(ctx context.Context, id string) (*vigil.Token, error) {
	if err := adminOnly(ctx); err != nil {
		return nil, err
	}
	if err := vigil.ValidName("id", id, s.maxName); err != nil {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no token %.40q", id)
	}
	t, err := s.store.TokenRevoke(ctx, vigil.TokenRevokeParams{ID: id, RevokedAt: s.now()})
	if err != nil {
		return nil, err
	}
	s.forget(t)
	return t, nil
}

// forget drops t from the cache, and keeps a lookup already reading from
// caching what it read.
func (s *Service) forget(t *vigil.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	delete(s.byHash, t.Hash)
	delete(s.byID, t.ID)
}

// lookup returns the token under key from the cache, or reads it with get
// and caches it. A token the store does not hold is not cached, so a
// stream of made-up tokens cannot fill the cache; nor is a row read while
// a revocation ran (see gen).
func (s *Service) lookup(ctx context.Context, m map[string]cached, key string, get func(context.Context, string) (*vigil.Token, error)) (*vigil.Token, error) {
	now := time.Now()
	var gen uint64
	if s.ttl > 0 {
		s.mu.Lock()
		c, ok := m[key]
		gen = s.gen
		s.mu.Unlock()
		if ok && now.Sub(c.at) < s.ttl {
			return c.tok, nil
		}
	}
	t, err := get(ctx, key)
	if err != nil {
		return nil, err
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if s.gen == gen {
			if len(m) >= maxCached {
				clear(m)
			}
			m[key] = cached{tok: t, at: now}
		}
		s.mu.Unlock()
	}
	return t, nil
}

// Authenticate checks a bearer token that is not the admin's: it is a
// scoped token, neither revoked nor expired, and the request then acts
// within its scope. It fits httpapi.Options.AuthenticateFunc.
func (s *Service) Authenticate(ctx context.Context, token string) (vigil.Scope, bool, error) {
	if !strings.HasPrefix(token, vigil.TokenPrefix) || len(token) > 256 {
		return vigil.Scope{}, false, nil
	}
	t, err := s.lookup(ctx, s.byHash, vigil.HashToken(token), s.store.TokenGetByHash)
	if errors.Is(err, vigil.ErrNotFound) {
		return vigil.Scope{}, false, nil
	}
	if err != nil {
		return vigil.Scope{}, false, err
	}
	if !t.Valid(s.now()) {
		return vigil.Scope{}, false, nil
	}
	return t.Scope(), true, nil
}

// CheckWatch is the scheduler's CheckFunc: a watch made by a scoped token
// that has since been revoked, has expired or is gone is cancelled
// silently before its probe (reason "revoked"). A watch the admin made is
// never stopped. A store that cannot be read is an error, retried.
func (s *Service) CheckWatch(ctx context.Context, w *vigil.Watch) error {
	if w.TokenID == "" {
		return nil
	}
	t, err := s.lookup(ctx, s.byID, w.TokenID, s.store.TokenGet)
	switch {
	case errors.Is(err, vigil.ErrNotFound):
		return &vigil.StopError{Reason: ReasonRevoked, Sentence: "Cancelled: the token that created this watch no longer exists."}
	case err != nil:
		return err
	case !t.RevokedAt.IsZero():
		return &vigil.StopError{Reason: ReasonRevoked, Sentence: "Cancelled: the token that created this watch was revoked."}
	case !t.Valid(s.now()):
		return &vigil.StopError{Reason: ReasonRevoked, Sentence: "Cancelled: the token that created this watch expired."}
	}
	return nil
}
