package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// openTokens is a TokenService that grants everything: the server's own
// admin-only check is what is under test.
type openTokens struct{}

func (openTokens) CreateToken(_ context.Context, r vigil.TokenCreateRequest) (*vigil.Token, error) {
	return &vigil.Token{ID: "tok_1", Recipients: r.Recipients, Secret: "vgl_plain"}, nil
}
func (openTokens) Tokens(context.Context, bool) ([]*vigil.Token, error) {
	return []*vigil.Token{{ID: "tok_1", Recipients: []string{"a"}, Secret: "vgl_plain"}}, nil
}
func (openTokens) RevokeToken(_ context.Context, id string) (*vigil.Token, error) {
	return &vigil.Token{ID: id, Secret: "vgl_plain"}, nil
}

// TestTokenRoutes: the admin creates (the plaintext shown once, not
// cached), lists and revokes (never the plaintext); a scoped token is
// answered 404 on each, whatever the token service would say.
func TestTokenRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) {
		o.Tokens = openTokens{}
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"a"}, TokenID: "tok_s"}, token == "vgl_scoped", nil
		}
	})
	routes := []request{
		{method: "POST", path: "/v1/tokens", body: `{"recipients":["a"]}`},
		{method: "GET", path: "/v1/tokens?all=true"},
		{method: "POST", path: "/v1/tokens/tok_1/revoke"},
	}
	for i, r := range routes {
		resp, b := e.do(t, r)
		want := []int{http.StatusCreated, http.StatusOK, http.StatusOK}[i]
		if resp.StatusCode != want {
			t.Errorf("admin %s %s = %s %s, want %d", r.method, r.path, resp.Status, b, want)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			// No route reads one token: a Location would name a 404.
			t.Errorf("admin %s %s: Location %q, but no route serves one token", r.method, r.path, loc)
		}
		if shown := strings.Contains(string(b), `"vgl_plain"`); shown != (i == 0) {
			t.Errorf("admin %s %s: plaintext shown = %v: %s", r.method, r.path, shown, b)
		}
		if i == 0 && resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("creation answer Cache-Control = %q, want no-store", resp.Header.Get("Cache-Control"))
		}
		r.header = map[string]string{"Authorization": "Bearer vgl_scoped"}
		resp, b = e.do(t, r)
		if resp.StatusCode != http.StatusNotFound || decodeError(t, b).Code != vigil.CodeNotFound {
			t.Errorf("scoped %s %s = %s %s, want 404 not_found", r.method, r.path, resp.Status, b)
		}
	}
}

// TestRevokeMalformedTokenID: a revocation whose id cannot be a token's
// (bytes not printable, too long) is answered 404 not_found saying no such
// token, as the store says of an id it does not hold; it said "no watch".
func TestRevokeMalformedTokenID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) { o.Tokens = openTokens{} })
	for _, id := range []string{"a%00b", "a%FFb", "a%E2%80%AEb", strings.Repeat("a", 65)} {
		resp, b := e.do(t, request{method: "POST", path: "/v1/tokens/" + id + "/revoke"})
		got := decodeError(t, b)
		if resp.StatusCode != http.StatusNotFound || got.Code != vigil.CodeNotFound || !strings.Contains(got.Message, "no token") || got.Field != "id" {
			t.Errorf("revoke %s = %s %s, want 404 not_found on id saying no token", id, resp.Status, b)
		}
	}
}
