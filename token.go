package vigil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"
)

// TokenPrefix starts the plaintext of every scoped token, so a leaked one
// is easy to recognise (and to redact).
const TokenPrefix = "vgl_"

// Token is a scoped API token as it is kept: its SHA-256, never its
// plaintext. A scoped token acts only for its recipients, only for its kinds
// (all when empty), watches only the forge repositories its Repos match
// (any the daemon's forge credentials can read when empty), runs commands
// only with Exec, and stops working when revoked or past ExpiresAt.
type Token struct {
	ID string
	// Hash is the lowercase hex SHA-256 of the plaintext (HashToken).
	Hash       string
	Recipients []string
	Kinds      []Kind
	// Repos are the globs over PROVIDER/REPO ("github/acme/*") that the
	// repositories of its forge watches must match; empty means any.
	Repos     []string
	Exec      bool
	CreatedAt time.Time
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time
	// RevokedAt is zero while the token is not revoked.
	RevokedAt time.Time
	// Secret is the plaintext, set only in the answer to its creation.
	Secret string
}

// HashToken returns the hash a Token keeps of a plaintext token.
func HashToken(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// Valid reports whether t may be used at now: not revoked, not expired.
func (t *Token) Valid(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// Scope returns what a request bearing t may do.
func (t *Token) Scope() Scope {
	return Scope{Recipients: slices.Clone(t.Recipients), Kinds: slices.Clone(t.Kinds), Repos: slices.Clone(t.Repos), Exec: t.Exec, TokenID: t.ID}
}

type tokenJSON struct {
	ID         string   `json:"id"`
	Recipients []string `json:"recipients"`
	Kinds      []Kind   `json:"kinds,omitempty"`
	Repos      []string `json:"repos,omitempty"`
	Exec       bool     `json:"exec"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at,omitempty"`
	RevokedAt  string   `json:"revoked_at,omitempty"`
	Token      string   `json:"token,omitempty"`
}

// MarshalJSON implements json.Marshaler. The hash never crosses the wire;
// the plaintext only in the answer to a creation.
func (t Token) MarshalJSON() ([]byte, error) {
	return json.Marshal(tokenJSON{ID: t.ID, Recipients: t.Recipients, Kinds: t.Kinds, Repos: t.Repos, Exec: t.Exec,
		CreatedAt: FormatTime(t.CreatedAt), ExpiresAt: FormatTime(t.ExpiresAt), RevokedAt: FormatTime(t.RevokedAt), Token: t.Secret})
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Token) UnmarshalJSON(b []byte) error {
	var j tokenJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Token{ID: j.ID, Recipients: j.Recipients, Kinds: j.Kinds, Repos: j.Repos, Exec: j.Exec, Secret: j.Token}
	var err error
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&out.CreatedAt, j.CreatedAt}, {&out.ExpiresAt, j.ExpiresAt}, {&out.RevokedAt, j.RevokedAt}} {
		if *f.dst, err = ParseTime(f.src); err != nil {
			return err
		}
	}
	*t = out
	return nil
}

// String never shows the plaintext, so a token printed by mistake leaks
// nothing.
func (t Token) String() string { return "token " + t.ID }

// TokenCreateRequest is the body of POST /v1/tokens.
type TokenCreateRequest struct {
	// Recipients the token acts for; at least one.
	Recipients []string `json:"recipients"`
	// Kinds the token may register; empty means every kind.
	Kinds []Kind `json:"kinds,omitempty"`
	// Repos limits the repositories its ci and ticket watches may name:
	// doublestar globs over PROVIDER/REPO, as "github/acme/*" or
	// "gitlab/group/**" (case does not matter); empty means any
	// repository the daemon's forge credentials can read.
	Repos []string `json:"repos,omitempty"`
	// Exec lets the token register kinds that run commands (the daemon's
	// exec setting must allow them too).
	Exec bool `json:"exec,omitempty"`
	// Expires is a duration from now ("30d") or an RFC 3339 time; "" never.
	Expires string `json:"expires,omitempty"`
}

// TokenService manages scoped tokens. Only the admin may call it: a scoped
// caller is answered not_found, as if there were nothing there. The auth
// package implements it in-process, package client over HTTP.
type TokenService interface {
	// CreateToken makes a token and returns it with its plaintext (Secret),
	// the only time the plaintext is shown.
	CreateToken(ctx context.Context, r TokenCreateRequest) (*Token, error)
	// Tokens lists tokens, oldest first; revoked ones only with all.
	Tokens(ctx context.Context, all bool) ([]*Token, error)
	// RevokeToken revokes a token at once: requests bearing it are refused
	// and the watches it made are cancelled before their next probe.
	RevokeToken(ctx context.Context, id string) (*Token, error)
}
