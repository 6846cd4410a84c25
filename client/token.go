package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

var _ vigil.TokenService = (*Client)(nil)

// CreateToken implements vigil.TokenService: POST /v1/tokens. The answer
// holds the plaintext (Secret), the only time it is shown.
func (c *Client) CreateToken(ctx context.Context, r vigil.TokenCreateRequest) (*vigil.Token, error) {
	var t vigil.Token
	if _, err := c.do(ctx, call{method: http.MethodPost, path: wire.PathTokens, body: r, out: &t}); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tokens implements vigil.TokenService: GET /v1/tokens.
func (c *Client) Tokens(ctx context.Context, all bool) ([]*vigil.Token, error) {
	var out struct {
		Tokens []*vigil.Token `json:"tokens"`
	}
	q := url.Values{}
	if all {
		q.Set("all", "true")
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: wire.PathTokens, query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken implements vigil.TokenService: POST /v1/tokens/{id}/revoke.
func (c *Client) RevokeToken(ctx context.Context, id string) (*vigil.Token, error) {
	var t vigil.Token
	if _, err := c.do(ctx, call{method: http.MethodPost, path: wire.TokenPath(id, "/revoke"), out: &t}); err != nil {
		return nil, err
	}
	return &t, nil
}
