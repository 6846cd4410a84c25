package vigil

import (
	"context"
	"time"
)

// TokenStore is the part of Store that keeps scoped API tokens, hashed: the
// plaintext is shown once at creation and never stored. See SPEC §9.
type TokenStore interface {
	// TokenCreate inserts p.Token (ID, Hash and CreatedAt set by the
	// caller). ErrConflict if its ID or Hash is taken.
	TokenCreate(ctx context.Context, p TokenCreateParams) error
	// TokenGet returns one token by id, revoked or not, or ErrNotFound.
	TokenGet(ctx context.Context, id string) (*Token, error)
	// TokenGetByHash returns the token whose Hash is hash, revoked or not,
	// or ErrNotFound.
	TokenGetByHash(ctx context.Context, hash string) (*Token, error)
	// TokenList returns every token, oldest first.
	TokenList(ctx context.Context, p TokenListParams) ([]*Token, error)
	// TokenRevoke marks a token revoked at p.RevokedAt and returns it as it
	// is afterwards; revoking a revoked token keeps the first time.
	// ErrNotFound if there is no such token.
	TokenRevoke(ctx context.Context, p TokenRevokeParams) (*Token, error)
}

// TokenCreateParams are the arguments of TokenStore.TokenCreate.
type TokenCreateParams struct {
	Token *Token
}

// TokenListParams filter TokenStore.TokenList.
type TokenListParams struct {
	// IncludeRevoked lists revoked tokens too.
	IncludeRevoked bool
}

// TokenRevokeParams are the arguments of TokenStore.TokenRevoke.
type TokenRevokeParams struct {
	ID        string
	RevokedAt time.Time
}
