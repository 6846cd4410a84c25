package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
)

const (
	tokenColumns = `id, hash, recipients, kinds, exec, created_at, expires_at, revoked_at, repos`
	tokenByID    = `SELECT ` + tokenColumns + ` FROM tokens WHERE id = $1`
)

func tokenNotFound(id string) error { return vigil.Errorf(vigil.CodeNotFound, "no token %q", id) }

func scanToken(r pgx.Row) (*vigil.Token, error) {
	var (
		t                vigil.Token
		recipients       string
		kinds, repos     *string
		created          int64
		expires, revoked *int64
	)
	if err := r.Scan(&t.ID, &t.Hash, &recipients, &kinds, &t.Exec, &created, &expires, &revoked, &repos); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(recipients), &t.Recipients); err != nil {
		return nil, err
	}
	var err error
	if t.Kinds, err = decodeKinds(kinds); err != nil {
		return nil, err
	}
	if repos != nil {
		if err := json.Unmarshal([]byte(*repos), &t.Repos); err != nil {
			return nil, err
		}
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = time.UnixMilli(created).UTC(), msTime(expires), msTime(revoked)
	return &t, nil
}

func decodeKinds(s *string) ([]vigil.Kind, error) {
	if s == nil {
		return nil, nil
	}
	var out []vigil.Kind
	return out, json.Unmarshal([]byte(*s), &out)
}

// TokenCreate implements vigil.TokenStore.
func (s *Store) TokenCreate(ctx context.Context, p vigil.TokenCreateParams) error {
	t := p.Token
	recipients, err := json.Marshal(t.Recipients)
	if err != nil {
		return wrap("create token", err)
	}
	var kinds *string
	if len(t.Kinds) > 0 {
		if kinds, err = jsonText(t.Kinds); err != nil {
			return wrap("create token", err)
		}
	}
	var repos *string
	if len(t.Repos) > 0 {
		if repos, err = jsonText(t.Repos); err != nil {
			return wrap("create token", err)
		}
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		t.ID, t.Hash, string(recipients), kinds, t.Exec, t.CreatedAt.UnixMilli(), ms(t.ExpiresAt), ms(t.RevokedAt), repos)
	return wrap("create token", err)
}

// TokenGet implements vigil.TokenStore.
func (s *Store) TokenGet(ctx context.Context, id string) (*vigil.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, tokenByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, tokenNotFound(id)
	}
	if err != nil {
		return nil, wrap("get token", err)
	}
	return t, nil
}

// TokenGetByHash implements vigil.TokenStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*vigil.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no such token")
	}
	if err != nil {
		return nil, wrap("get token by hash", err)
	}
	return t, nil
}

// TokenList implements vigil.TokenStore.
func (s *Store) TokenList(ctx context.Context, p vigil.TokenListParams) ([]*vigil.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE $1 OR revoked_at IS NULL ORDER BY created_at, id`, p.IncludeRevoked)
	if err != nil {
		return nil, wrap("list tokens", err)
	}
	defer rows.Close()
	out := []*vigil.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, wrap("list tokens", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list tokens", err)
	}
	return out, nil
}

// TokenRevoke implements vigil.TokenStore.
func (s *Store) TokenRevoke(ctx context.Context, p vigil.TokenRevokeParams) (*vigil.Token, error) {
	var out *vigil.Token
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, p.RevokedAt.UnixMilli(), p.ID); err != nil {
			return err
		}
		t, err := scanToken(tx.QueryRow(ctx, tokenByID, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return tokenNotFound(p.ID)
		}
		out = t
		return err
	})
	if err != nil {
		return nil, wrap("revoke token", err)
	}
	return out, nil
}
