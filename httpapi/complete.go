package httpapi

import (
	"net/http"
	"strings"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// completeResult is the answer to a completion: only what the holder of
// the token needs, since the token is its only credential.
type completeResult struct {
	WatchID  string      `json:"watch_id"`
	State    vigil.State `json:"state"`
	Sentence string      `json:"sentence,omitempty"`
}

// complete serves POST /v1/complete/{token}: no bearer token, the path's
// token is the capability. An empty body, or one without status (data
// alone), completes with status success.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) error {
	req := vigil.CompleteRequest{Status: vigil.CompleteSuccess}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if err := decodeBody(r, &req); err != nil {
			return err
		}
	}
	req.Token = r.PathValue("token")
	wt, err := s.svc.Complete(r.Context(), req)
	if err != nil {
		return err
	}
	if wt == nil {
		return errNoResult
	}
	res := completeResult{WatchID: wt.ID, State: wt.State}
	if wt.Outcome != nil {
		res.Sentence = wt.Outcome.Sentence
	}
	return writeJSON(w, http.StatusOK, res)
}

// CompletionPath is the path of a completion token's URL.
func CompletionPath(token string) string { return wire.CompletionPath(token) }

// logPath is the path of r as it may be logged: a completion token is a
// credential and never reaches a log.
func logPath(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, completePrefix) {
		return completePrefix + "{token}"
	}
	if isUnsubscribe(r.URL.Path) {
		return UnsubscribePrefix + "{id}/{sig}"
	}
	return r.URL.Path
}

const completePrefix = wire.CompletePrefix

// baseURL is the scheme and host the caller reached the API at.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
