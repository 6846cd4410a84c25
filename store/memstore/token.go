package memstore

import (
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/vigil-run/vigil"
)

// tokens keeps scoped tokens; it has its own lock, so token lookups on
// every request never wait behind the watches.
type tokens struct {
	mu   sync.Mutex
	byID map[string]*vigil.Token
}

func cloneToken(t *vigil.Token) *vigil.Token {
	c := *t
	c.Recipients = slices.Clone(t.Recipients)
	c.Kinds = slices.Clone(t.Kinds)
	c.Repos = slices.Clone(t.Repos)
	c.Secret = ""
	c.CreatedAt, c.ExpiresAt, c.RevokedAt = ms(t.CreatedAt), ms(t.ExpiresAt), ms(t.RevokedAt)
	return &c
}

// checkOpen is check for the token methods, which do not hold s.mu.
func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check()
}

func tokenNotFound(id string) error { return vigil.Errorf(vigil.CodeNotFound, "no token %q", id) }

// TokenCreate implements vigil.TokenStore.
func (s *Store) TokenCreate(ctx context.Context, p vigil.TokenCreateParams) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	if s.tok.byID == nil {
		s.tok.byID = map[string]*vigil.Token{}
	}
	if _, ok := s.tok.byID[p.Token.ID]; ok {
		return vigil.Errorf(vigil.CodeConflict, "token %s exists", p.Token.ID)
	}
	for _, t := range s.tok.byID {
		if t.Hash == p.Token.Hash {
			return vigil.Errorf(vigil.CodeConflict, "a token with that hash exists")
		}
	}
	s.tok.byID[p.Token.ID] = cloneToken(p.Token)
	return nil
}

// TokenGet implements vigil.TokenStore.
func (s *Store) TokenGet(ctx context.Context, id string) (*vigil.Token, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	t, ok := s.tok.byID[id]
	if !ok {
		return nil, tokenNotFound(id)
	}
	return cloneToken(t), nil
}

// TokenGetByHash implements vigil.TokenStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*vigil.Token, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	for _, t := range s.tok.byID {
		if t.Hash == hash {
			return cloneToken(t), nil
		}
	}
	return nil, vigil.Errorf(vigil.CodeNotFound, "no such token")
}

// TokenList implements vigil.TokenStore.
func (s *Store) TokenList(ctx context.Context, p vigil.TokenListParams) ([]*vigil.Token, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	out := make([]*vigil.Token, 0, len(s.tok.byID))
	for _, t := range s.tok.byID {
		if p.IncludeRevoked || t.RevokedAt.IsZero() {
			out = append(out, cloneToken(t))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// TokenRevoke implements vigil.TokenStore.
func (s *Store) TokenRevoke(ctx context.Context, p vigil.TokenRevokeParams) (*vigil.Token, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	s.tok.mu.Lock()
	defer s.tok.mu.Unlock()
	t, ok := s.tok.byID[p.ID]
	if !ok {
		return nil, tokenNotFound(p.ID)
	}
	if t.RevokedAt.IsZero() {
		t.RevokedAt = ms(p.RevokedAt)
	}
	return cloneToken(t), nil
}
