package httpapi

import (
	"net/http"

	"github.com/vigil-run/vigil"
)

// errNoTokens answers the token routes of a server without a token
// service, and a scoped caller: as if nothing were there.
var errNoTokens = &vigil.Error{Code: vigil.CodeNotFound, Message: "not found"}

// tokens returns the token service for an admin request, or not_found.
func (s *Server) tokenService(r *http.Request) (vigil.TokenService, error) {
	if _, scoped := vigil.ScopeFrom(r.Context()); scoped || s.tokens == nil {
		return nil, errNoTokens
	}
	return s.tokens, nil
}

// createToken serves POST /v1/tokens (the admin only). The answer holds
// the plaintext, the only time it is shown.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.tokenService(r)
	if err != nil {
		return err
	}
	var req vigil.TokenCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	t, err := ts.CreateToken(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, t)
}

// tokenList is the body of GET /v1/tokens.
type tokenList struct {
	Tokens []*vigil.Token `json:"tokens"`
}

// listTokens serves GET /v1/tokens (the admin only).
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.tokenService(r)
	if err != nil {
		return err
	}
	all, err := boolParam(r.URL.Query(), "all")
	if err != nil {
		return err
	}
	list, err := ts.Tokens(r.Context(), all)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*vigil.Token{}
	}
	for _, t := range list {
		t.Secret = ""
	}
	return writeJSON(w, http.StatusOK, tokenList{Tokens: list})
}

// revokeToken serves POST /v1/tokens/{id}/revoke (the admin only).
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.tokenService(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkIDOf("token", id); err != nil {
		return err
	}
	t, err := ts.RevokeToken(r.Context(), id)
	if err != nil {
		return err
	}
	t.Secret = ""
	return writeJSON(w, http.StatusOK, t)
}
