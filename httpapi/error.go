package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// StatusOf returns the HTTP status the API answers with for an error code
// (see wire.StatusOf: the one table that the server, the client and the
// documentation share).
func StatusOf(code vigil.Code) int { return wire.StatusOf(code) }

// Codes returns every error code the API answers with, in table order.
func Codes() []vigil.Code { return wire.Codes() }

// known reports whether the table holds code.
func known(code vigil.Code) bool { return wire.Known(code) }

// errorBody is the one error shape: {"error":{"code","message","field"}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    vigil.Code `json:"code"`
	Message string     `json:"message"`
	Field   string     `json:"field,omitempty"`
}

// fail is the one place that answers an error. Anything that is not a
// *vigil.Error with a code from the table is internal: the user reads
// "internal error" and the cause is logged once with the request id. If
// the response has already started (an event stream), fail only logs.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	code := vigil.ErrorCode(err)
	if !known(code) {
		code = vigil.CodeInternal
	}
	if code == vigil.CodeInternal && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// The caller went away; nobody is left to answer.
		s.log.DebugContext(ctx, "request abandoned by the client", "request_id", requestIDFrom(ctx))
		return
	}
	body := errorBody{Error: errorDetail{Code: code, Message: "internal error"}}
	if code == vigil.CodeInternal {
		s.log.ErrorContext(ctx, "internal error", "request_id", requestIDFrom(ctx),
			"method", r.Method, "path", logPath(r), "err", err)
	} else {
		body.Error.Message = vigil.ErrorMessage(err)
		body.Error.Field = vigil.ErrorField(err)
	}
	if started(w) {
		return
	}
	b, _ := json.Marshal(body) // cannot fail: strings only
	h := w.Header()
	h.Set("Content-Type", contentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del(HeaderReplayed)
	w.WriteHeader(StatusOf(code))
	_, _ = w.Write(append(b, '\n'))
}

// Fail answers err in the one error shape, for handlers mounted around the
// server's own (the daemon's start-up gate).
func (s *Server) Fail(w http.ResponseWriter, r *http.Request, err error) { s.fail(w, r, err) }

// writeJSON answers v as JSON with status. A watch and a batch's answer
// write their own bytes (the same encoding/json would write, tested where
// they are written), without encoding/json's second pass over them.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var b []byte
	var err error
	switch x := v.(type) {
	case *vigil.Watch:
		if x != nil {
			b, err = x.MarshalJSON()
		} else {
			b = []byte("null")
		}
	case BatchResponse:
		b, err = x.AppendJSON(make([]byte, 0, 64+640*len(x.Results)))
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
