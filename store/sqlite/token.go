package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/vigil-run/vigil"
)

// Tokens are few and written rarely: their statements are not prepared.
const (
	tokenColumns = `id, hash, recipients, kinds, exec, created_at, expires_at, revoked_at, repos`
	tokenInsert  = `INSERT INTO tokens (` + tokenColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	tokenByID    = `SELECT ` + tokenColumns + ` FROM tokens WHERE id = ?`
	tokenByHash  = `SELECT ` + tokenColumns + ` FROM tokens WHERE hash = ?`
	tokenAll     = `SELECT ` + tokenColumns + ` FROM tokens WHERE ? OR revoked_at IS NULL ORDER BY created_at, id`
	tokenRevoke  = `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`
)

func tokenNotFound(id string) error { return vigil.Errorf(vigil.CodeNotFound, "no token %q", id) }

func msOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromMs(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

func scanToken(r scanner) (*vigil.Token, error) {
	var (
		t                vigil.Token
		recipients       string
		kinds, repos     sql.NullString
		exec             bool
		created          int64
		expires, revoked sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.Hash, &recipients, &kinds, &exec, &created, &expires, &revoked, &repos); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(recipients), &t.Recipients); err != nil {
		return nil, err
	}
	if kinds.Valid {
		if err := json.Unmarshal([]byte(kinds.String), &t.Kinds); err != nil {
			return nil, err
		}
	}
	if repos.Valid {
		if err := json.Unmarshal([]byte(repos.String), &t.Repos); err != nil {
			return nil, err
		}
	}
	t.Exec = exec
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = time.UnixMilli(created).UTC(), fromMs(expires), fromMs(revoked)
	return &t, nil
}

// TokenCreate implements vigil.TokenStore.
func (s *Store) TokenCreate(ctx context.Context, p vigil.TokenCreateParams) error {
	t := p.Token
	recipients, err := json.Marshal(t.Recipients)
	if err != nil {
		return wrap("create token", err)
	}
	var kinds any
	if len(t.Kinds) > 0 {
		b, err := json.Marshal(t.Kinds)
		if err != nil {
			return wrap("create token", err)
		}
		kinds = string(b)
	}
	var repos any
	if len(t.Repos) > 0 {
		b, err := json.Marshal(t.Repos)
		if err != nil {
			return wrap("create token", err)
		}
		repos = string(b)
	}
	return s.w.do(ctx, func(w *wtx) error {
		_, err := w.conn.ExecContext(context.Background(), tokenInsert, t.ID, t.Hash, string(recipients), kinds, t.Exec,
			t.CreatedAt.UnixMilli(), msOrNull(t.ExpiresAt), msOrNull(t.RevokedAt), repos)
		if err != nil {
			return wrap("create token", err)
		}
		return nil
	})
}

// TokenGet implements vigil.TokenStore.
func (s *Store) TokenGet(ctx context.Context, id string) (*vigil.Token, error) {
	t, err := scanToken(s.readDB.QueryRowContext(ctx, tokenByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, tokenNotFound(id)
	}
	if err != nil {
		return nil, wrap("get token", err)
	}
	return t, nil
}

// TokenGetByHash implements vigil.TokenStore.
func (s *Store) TokenGetByHash(ctx context.Context, hash string) (*vigil.Token, error) {
	t, err := scanToken(s.readDB.QueryRowContext(ctx, tokenByHash, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, vigil.Errorf(vigil.CodeNotFound, "no such token")
	}
	if err != nil {
		return nil, wrap("get token by hash", err)
	}
	return t, nil
}

// TokenList implements vigil.TokenStore.
func (s *Store) TokenList(ctx context.Context, p vigil.TokenListParams) ([]*vigil.Token, error) {
	rows, err := s.readDB.QueryContext(ctx, tokenAll, p.IncludeRevoked)
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
	err := s.w.do(ctx, func(w *wtx) error {
		bg := context.Background()
		if _, err := w.conn.ExecContext(bg, tokenRevoke, p.RevokedAt.UnixMilli(), p.ID); err != nil {
			return wrap("revoke token", err)
		}
		t, err := scanToken(w.conn.QueryRowContext(bg, tokenByID, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return tokenNotFound(p.ID)
		}
		if err != nil {
			return wrap("revoke token", err)
		}
		out = t
		return nil
	})
	return out, err
}
