package wire

import (
	"net/http"

	"github.com/vigil-run/vigil"
)

// statuses is the one table from error code to HTTP status. Its order is
// the order Codes returns and the OpenAPI document lists.
var statuses = []struct {
	code   vigil.Code
	status int
}{
	{vigil.CodeInvalidRequest, http.StatusUnprocessableEntity},
	{vigil.CodeUnknownKind, http.StatusUnprocessableEntity},
	{vigil.CodeInvalidPredicate, http.StatusUnprocessableEntity},
	{vigil.CodeWatchUnobservable, http.StatusUnprocessableEntity},
	{vigil.CodeDeadlineOutOfRange, http.StatusUnprocessableEntity},
	{vigil.CodeIntervalTooSmall, http.StatusUnprocessableEntity},
	{vigil.CodeQuotaExceeded, http.StatusTooManyRequests},
	{vigil.CodeChainTooDeep, http.StatusUnprocessableEntity},
	{vigil.CodeUnauthorized, http.StatusUnauthorized},
	{vigil.CodeForbidden, http.StatusForbidden},
	{vigil.CodeNotFound, http.StatusNotFound},
	{vigil.CodeMethodNotAllowed, http.StatusMethodNotAllowed},
	{vigil.CodeIdempotencyConflict, http.StatusConflict},
	{vigil.CodeConflict, http.StatusConflict},
	{vigil.CodePayloadTooLarge, http.StatusRequestEntityTooLarge},
	{vigil.CodeUnsupportedMedia, http.StatusUnsupportedMediaType},
	{vigil.CodeRateLimited, http.StatusTooManyRequests},
	{vigil.CodeUnavailable, http.StatusServiceUnavailable},
	{vigil.CodeStorageFull, http.StatusInsufficientStorage},
	{vigil.CodeInternal, http.StatusInternalServerError},
}

// StatusOf returns the HTTP status the API answers with for an error code:
// the one table that the server, the client and the documentation share.
// A code the table does not hold is answered as internal (500).
func StatusOf(code vigil.Code) int {
	for _, e := range statuses {
		if e.code == code {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// Codes returns every error code the API answers with, in table order.
func Codes() []vigil.Code {
	cs := make([]vigil.Code, len(statuses))
	for i, e := range statuses {
		cs[i] = e.code
	}
	return cs
}

// Known reports whether the table holds code.
func Known(code vigil.Code) bool {
	for _, e := range statuses {
		if e.code == code {
			return true
		}
	}
	return false
}
