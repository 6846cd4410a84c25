package vigil

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code. Codes are part of the wire
// format: append only.
type Code string

// The error codes of SPEC §3, plus the transport-level ones. forbidden
// refuses what the caller's token may not do (a scope it lacks) and a
// request from a foreign Host or Origin; not_found stays for what the
// caller may not see. method_not_allowed answers a known path asked with a
// method it does not serve.
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeUnknownKind         Code = "unknown_kind"
	CodeInvalidPredicate    Code = "invalid_predicate"
	CodeWatchUnobservable   Code = "watch_unobservable"
	CodeDeadlineOutOfRange  Code = "deadline_out_of_range"
	CodeIntervalTooSmall    Code = "interval_too_small"
	CodeQuotaExceeded       Code = "quota_exceeded"
	CodeChainTooDeep        Code = "chain_too_deep"
	CodeUnauthorized        Code = "unauthorized"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeMethodNotAllowed    Code = "method_not_allowed"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeConflict            Code = "conflict"
	CodePayloadTooLarge     Code = "payload_too_large"
	CodeUnsupportedMedia    Code = "unsupported_media_type"
	CodeRateLimited         Code = "rate_limited"
	CodeUnavailable         Code = "unavailable"
	CodeStorageFull         Code = "storage_full" // the disk is full: nothing was written
	CodeInternal            Code = "internal"
)

// Error is vigil's one error type. Message is a sentence safe to show a user;
// Field names the request field at fault, if any; Err is the cause, never
// shown to users for internal errors.
type Error struct {
	Code    Code
	Message string
	Field   string
	Err     error
}

// Sentinel errors for errors.Is: any *Error with the same code matches.
var (
	ErrNotFound            = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict            = &Error{Code: CodeConflict, Message: "conflict"}
	ErrQuotaExceeded       = &Error{Code: CodeQuotaExceeded, Message: "quota exceeded"}
	ErrIdempotencyConflict = &Error{Code: CodeIdempotencyConflict, Message: "idempotency key reused with a different request"}
	ErrUnauthorized        = &Error{Code: CodeUnauthorized, Message: "unauthorized"}
	ErrStorageFull         = &Error{Code: CodeStorageFull, Message: "the disk holding vigil's database is full, so nothing was written: free some space and try again"}
)

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = string(e.Code)
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an *Error about one request field.
func FieldErrorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns err's code, CodeInternal for errors that are not an
// *Error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the sentence to show a user for err: the message of
// an *Error, "internal error" for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal {
		return e.Error()
	}
	return "internal error"
}

// ErrorField returns the field at fault, if err names one.
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
