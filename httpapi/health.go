package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/vigil-run/vigil"
)

// openAPI is the API's OpenAPI 3.1 document; a test keeps it and the route
// table in step.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document served at /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

type status struct {
	Status string `json:"status"`
}

// healthz serves GET /healthz: the process is up.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, status{"ok"})
}

// readyz serves GET /readyz: the daemon can serve (ReadyFunc says so).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			// Always 503; the message is the error's own only when it is
			// a user-safe *vigil.Error.
			msg := "not ready"
			if vigil.ErrorCode(err) != vigil.CodeInternal {
				msg = "not ready: " + vigil.ErrorMessage(err)
			}
			s.log.DebugContext(r.Context(), "not ready", "request_id", requestIDFrom(r.Context()), "err", err)
			return &vigil.Error{Code: vigil.CodeUnavailable, Message: msg, Err: err}
		}
	}
	return writeJSON(w, http.StatusOK, status{"ready"})
}

// openapi serves GET /openapi.json.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
	return nil
}
