package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

func invalid(field, format string, args ...any) error {
	return vigil.FieldErrorf(vigil.CodeInvalidRequest, field, format, args...)
}

// checkQuery refuses query parameters a route does not take, parameters
// given twice that may be given once, and a query that does not parse: a
// typo in a filter must never widen a listing.
func checkQuery(r *http.Request, allowed map[string]bool) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return invalid("", "the query string does not parse: %v", err)
	}
	for name, vs := range q {
		if !allowed[name] {
			return invalid(clip(name), "unknown query parameter %q", clip(name))
		}
		if len(vs) > 1 && !repeatable(name) {
			return invalid(name, "query parameter %q is given %d times; give it once", name, len(vs))
		}
	}
	return nil
}

// checkBody bounds a body, and refuses one that is too large or is not
// JSON.
func (s *Server) checkBody(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > s.maxBody {
		return tooLarge(s.maxBody)
	}
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != contentTypeJSON {
			return vigil.Errorf(vigil.CodeUnsupportedMedia, "the request body must be JSON, sent with Content-Type: application/json")
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	return nil
}

func tooLarge(n int64) error {
	return vigil.Errorf(vigil.CodePayloadTooLarge, "the request body is larger than the limit of %d bytes", n)
}

// decodeBody decodes one JSON value from r's body into v, refusing unknown
// fields (naming them), a key given twice in any object (naming it), a
// wrong type (naming the field), and anything after the value.
func decodeBody(r *http.Request, v any) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return invalid("", "the request body is empty; send a JSON object")
	}
	// The body is bounded (checkBody), so it is read whole: the duplicate
	// check and the decoding each need all of it.
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if req, ok := v.(*vigil.RegisterRequest); ok && quickRegister(b, req) {
		return nil
	}
	return decodeJSON(b, v)
}

// decodeJSON is decodeBody's reading of a body read whole.
func decodeJSON(b []byte, v any) error {
	if err := duplicateKey(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			if e := decodeError(err); vigil.ErrorCode(e) == vigil.CodePayloadTooLarge {
				return e
			}
		}
		return invalid("", "the request body holds more than one JSON value")
	}
	return nil
}

// duplicateKey refuses a JSON text in which an object, at any depth, gives
// a key twice (wire.DuplicateKey): encoding/json would keep the last
// silently, so what the caller meant is not known.
func duplicateKey(b []byte) error {
	if p, twice := wire.DuplicateKey(b); twice {
		return invalid(clip(p), "key %q is given twice; give each key once", clip(p))
	}
	return nil
}

// decodeError turns a json or body-size error into a request error.
func decodeError(err error) error {
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return tooLarge(maxErr.Limit)
	case errors.Is(err, io.EOF):
		return invalid("", "the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the request body ends in the middle of a JSON value")
	case errors.As(err, &syntaxErr):
		return invalid("", "the request body is not valid JSON (at byte %d): %v", syntaxErr.Offset, syntaxErr)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return invalid("", "the request body must be a JSON object, not %s", typeErr.Value)
		}
		return invalid(field, "field %q must be %s, not %s", field, jsonType(typeErr.Type.Kind().String()), typeErr.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if unq, err := strconv.Unquote(name); err == nil {
			name = unq
		}
		return invalid(clip(name), "unknown field %q", clip(name))
	}
	return invalid("", "the request body could not be read: %v", err)
}

func jsonType(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "true or false"
	case goKind == "map", goKind == "struct":
		return "an object"
	case goKind == "slice", goKind == "array":
		return "an array"
	}
	return "of another type"
}

// clip bounds a caller-supplied string before it is echoed in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// checkName checks the spelling of a recipient or reader name; the service
// checks the length against its own limits.
func checkName(field, s string) error { return vigil.ValidName(field, s, 1<<10) }

// checkID answers not_found for a watch id that cannot exist.
func checkID(id string) error { return checkIDOf("watch", id) }

// checkIDOf answers not_found for an id of what ("watch", "token") that
// cannot exist, naming what the id was taken for.
func checkIDOf(what, id string) error {
	if id == "" || len(id) > 64 || !plain(id) {
		return vigil.FieldErrorf(vigil.CodeNotFound, "id", "no %s %q", what, clip(id))
	}
	return nil
}

// waitParam parses a long-poll duration parameter: absent means def, and
// more than the server's MaxWait is clamped, which the response announces
// in the Vigil-Wait-Clamped header.
func (s *Server) waitParam(w http.ResponseWriter, q url.Values, name string, def time.Duration) (time.Duration, error) {
	d := def
	if v, ok := q[name]; ok {
		var err error
		if d, err = vigil.ParseDuration(v[0]); err != nil {
			return 0, invalid(name, "%s: %v", name, err)
		}
	}
	if d > s.maxWait {
		d = s.maxWait
		w.Header().Set(HeaderWaitClamped, seconds(s.maxWait))
	}
	return d, nil
}

// seconds formats d in seconds ("60s", "1.5s"), which ParseDuration reads.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func boolParam(q url.Values, name string) (bool, error) {
	v, ok := q[name]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return false, invalid(name, "%s must be true or false, not %q", name, clip(v[0]))
	}
	return b, nil
}

// limitParam parses a page size between 1 and 1000; absent is 0 (the
// service's default).
func limitParam(q url.Values) (int, error) {
	v, ok := q["limit"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > 1000 {
		return 0, invalid("limit", "limit must be a whole number between 1 and 1000, not %q", clip(v[0]))
	}
	return n, nil
}

// maxLabelKey bounds a label's key, as registration does.
const maxLabelKey = 63

// labelParams parses repeated label=key=value filters.
func labelParams(q url.Values) (map[string]string, error) {
	vs := q["label"]
	if len(vs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vs))
	for _, v := range vs {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, invalid("label", "label filters are written key=value, not %q", clip(v))
		}
		if vigil.ValidName("label", k, maxLabelKey) != nil {
			return nil, invalid("label", "label key %q may hold only letters, digits and . _ : @ + - (at most %d bytes)", clip(k), maxLabelKey)
		}
		if old, dup := m[k]; dup && old != val {
			return nil, invalid("label", "label %q is filtered on twice with different values", clip(k))
		}
		m[k] = val
	}
	return m, nil
}
