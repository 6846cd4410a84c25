package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/store/memstore"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func TestCreateAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	c := &clock{t: t0}
	s := auth.New(auth.Config{Store: st, NowFunc: c.Now})
	tok, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"b", "a", "a"}, Kinds: []vigil.Kind{vigil.KindHTTP}, Expires: "30d"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Secret, vigil.TokenPrefix) || len(tok.Secret) != len(vigil.TokenPrefix)+43 {
		t.Fatalf("Secret = %q, want vgl_ and 43 base64url characters", tok.Secret)
	}
	stored, _ := st.TokenGet(ctx, tok.ID)
	if stored.Secret != "" || stored.Hash != vigil.HashToken(tok.Secret) || strings.Contains(stored.Hash, tok.Secret) {
		t.Fatalf("stored %+v: want only the hash", stored)
	}
	if !tok.ExpiresAt.Equal(t0.Add(30 * 24 * time.Hour)) {
		t.Errorf("ExpiresAt = %v, want 30 days on", tok.ExpiresAt)
	}
	scope, ok, err := s.Authenticate(ctx, tok.Secret)
	if err != nil || !ok || scope.TokenID != tok.ID || strings.Join(scope.Recipients, ",") != "a,b" || scope.Exec {
		t.Fatalf("Authenticate = %+v, %v, %v", scope, ok, err)
	}
	if _, ok, _ := s.Authenticate(ctx, tok.Secret+"x"); ok {
		t.Error("a wrong token authenticated")
	}
	w := &vigil.Watch{ID: "w1", TokenID: tok.ID}
	if err := s.CheckWatch(ctx, w); err != nil {
		t.Fatalf("CheckWatch of a valid token's watch = %v", err)
	}
	// Revocation takes effect at once, cache or no cache.
	if _, err := s.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Authenticate(ctx, tok.Secret); ok {
		t.Error("a revoked token authenticated")
	}
	var se *vigil.StopError
	if err := s.CheckWatch(ctx, w); !errors.As(err, &se) || se.Reason != auth.ReasonRevoked {
		t.Errorf("CheckWatch after revocation = %v, want a StopError revoked", err)
	}
	if err := s.CheckWatch(ctx, &vigil.Watch{ID: "w2"}); err != nil {
		t.Errorf("CheckWatch of an admin watch = %v, want nil", err)
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: t0}
	s := auth.New(auth.Config{Store: memstore.New(), NowFunc: c.Now, CacheTTL: -1})
	tok, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}, Expires: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	c.t = t0.Add(time.Hour)
	if _, ok, _ := s.Authenticate(ctx, tok.Secret); ok {
		t.Error("an expired token authenticated")
	}
	var se *vigil.StopError
	if err := s.CheckWatch(ctx, &vigil.Watch{ID: "w", TokenID: tok.ID}); !errors.As(err, &se) {
		t.Errorf("CheckWatch after expiry = %v, want a StopError", err)
	}
}

func TestAdminOnlyAndValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := auth.New(auth.Config{Store: memstore.New()})
	scoped := vigil.WithScope(ctx, vigil.Scope{Recipients: []string{"a"}, TokenID: "tok_x"})
	if _, err := s.CreateToken(scoped, vigil.TokenCreateRequest{Recipients: []string{"a"}}); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("CreateToken by a scoped token = %v, want not_found", err)
	}
	if _, err := s.Tokens(scoped, true); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("Tokens by a scoped token = %v, want not_found", err)
	}
	if _, err := s.RevokeToken(scoped, "tok_x"); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("RevokeToken by a scoped token = %v, want not_found", err)
	}
	for _, r := range []vigil.TokenCreateRequest{
		{},
		{Recipients: []string{""}},
		{Recipients: []string{"a"}, Kinds: []vigil.Kind{"nope"}},
		{Recipients: []string{"a"}, Expires: "-1h"},
		{Recipients: []string{"a"}, Expires: "2020-01-01T00:00:00Z"},
	} {
		if _, err := s.CreateToken(ctx, r); err == nil || vigil.ErrorCode(err) == vigil.CodeInternal {
			t.Errorf("CreateToken(%+v) = %v, want a refusal", r, err)
		}
	}
	if _, err := s.RevokeToken(ctx, "tok_nope"); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("RevokeToken(unknown) = %v, want not_found", err)
	}
}

// pausingStore holds the next token read, after it has read the row, until
// released: a lookup that read the row before a revocation committed.
type pausingStore struct {
	vigil.TokenStore
	mu      sync.Mutex
	read    chan struct{} // closed once the held read has its row
	release chan struct{}
}

func (s *pausingStore) hold() (read, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read, s.release = make(chan struct{}), make(chan struct{})
	return s.read, s.release
}

func (s *pausingStore) pause() {
	s.mu.Lock()
	read, release := s.read, s.release
	s.read, s.release = nil, nil
	s.mu.Unlock()
	if read != nil {
		close(read)
		<-release
	}
}

func (s *pausingStore) TokenGet(ctx context.Context, id string) (*vigil.Token, error) {
	t, err := s.TokenStore.TokenGet(ctx, id)
	s.pause()
	return t, err
}

func (s *pausingStore) TokenGetByHash(ctx context.Context, hash string) (*vigil.Token, error) {
	t, err := s.TokenStore.TokenGetByHash(ctx, hash)
	s.pause()
	return t, err
}

// TestRevokeDuringLookup: a lookup that read the token before a
// revocation committed, and finishes after it, does not leave the stale
// row in the cache: the next request is refused and the next probe of the
// token's watch is stopped, at once.
func TestRevokeDuringLookup(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"Authenticate", "CheckWatch"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := &pausingStore{TokenStore: memstore.New()}
			s := auth.New(auth.Config{Store: st, CacheTTL: time.Hour})
			tok, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}})
			if err != nil {
				t.Fatal(err)
			}
			w := &vigil.Watch{ID: "w1", TokenID: tok.ID}
			lookup := func() bool {
				if path == "Authenticate" {
					_, ok, err := s.Authenticate(ctx, tok.Secret)
					if err != nil {
						t.Errorf("Authenticate error = %v", err)
					}
					return ok
				}
				err := s.CheckWatch(ctx, w)
				var se *vigil.StopError
				if err != nil && !errors.As(err, &se) {
					t.Errorf("CheckWatch error = %v", err)
				}
				return err == nil
			}
			read, release := st.hold()
			done := make(chan bool)
			go func() { done <- lookup() }()
			<-read
			if _, err := s.RevokeToken(ctx, tok.ID); err != nil {
				t.Fatal(err)
			}
			close(release)
			if !<-done {
				t.Fatalf("%s that read the token before the revocation refused it; want it to answer from what it read", path)
			}
			if lookup() {
				t.Errorf("%s after the revocation allowed the token: a stale row was cached", path)
			}
		})
	}
}

// TestExpiresWithinTheMillisecond: an expiry less than a millisecond on,
// which would be kept (truncated to the millisecond) as the creation's
// own instant, is refused as not in the future, not made into a token
// that never authenticates.
func TestExpiresWithinTheMillisecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: t0}
	s := auth.New(auth.Config{Store: memstore.New(), NowFunc: c.Now})
	tok, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}, Expires: "2026-05-01T12:00:00.0005Z"})
	if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "expires" {
		t.Fatalf("CreateToken(expires half a millisecond on) = %v, %v; want invalid_request on expires", tok, err)
	}
	tok, err = s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}, Expires: "2026-05-01T12:00:00.0015Z"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Authenticate(ctx, tok.Secret); !ok || err != nil {
		t.Errorf("a token expiring 1.5 ms on does not authenticate at its creation: %v, %v", ok, err)
	}
}
