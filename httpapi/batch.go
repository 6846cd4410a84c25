package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// The batch answer's shapes live in internal/wire, shared with the client.
type (
	BatchResponse = wire.BatchResponse
	BatchItem     = wire.BatchItem
	BatchError    = wire.BatchError
)

// registerBatch serves POST /v1/watches/batch: {"watches": [...]} with 1
// to vigil.MaxBatch registrations, each answered in its place. The call is
// refused whole only when its envelope is wrong (not a JSON object, an
// unknown or repeated key, no "watches" array, more than vigil.MaxBatch
// items, a body over the bound); an item that is not an object, does not
// decode, or is refused by the service is answered in its place.
func (s *Server) registerBatch(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get(HeaderIdempotencyKey) != "" {
		return invalid(HeaderIdempotencyKey, "a batch takes an idempotency_key in each item, not the %s header", HeaderIdempotencyKey)
	}
	depth := 0
	if v := r.Header.Get(HeaderChainDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return invalid(HeaderChainDepth, "the %s header must be a non-negative whole number, not %q", HeaderChainDepth, clip(v))
		}
		depth = n
	}
	items, err := decodeBatch(r)
	if err != nil {
		return err
	}
	if err := s.rateLimitN(w, r, len(items)); err != nil {
		return err
	}
	out := make([]BatchItem, len(items))
	reqs := make([]vigil.RegisterRequest, 0, len(items))
	at := make([]int, 0, len(items))
	for i, raw := range items {
		req, err := decodeItem(raw)
		if err != nil {
			out[i] = s.refusedItem(r, err)
			continue
		}
		req.ChainDepth = depth
		reqs = append(reqs, req)
		at = append(at, i)
	}
	if len(reqs) > 0 {
		res, err := s.svc.RegisterBatch(r.Context(), reqs)
		if err != nil {
			return err
		}
		if len(res) != len(reqs) {
			return errNoResult
		}
		base := ""
		for j, br := range res {
			i := at[j]
			if br.Status == vigil.BatchRefused || br.Watch == nil {
				if br.Err == nil {
					br.Err = errNoResult
				}
				out[i] = s.refusedItem(r, br.Err)
				continue
			}
			wt := br.Watch
			if wt.CompletionToken != "" {
				if base == "" {
					base = baseURL(r)
				}
				wt.CompletionURL = base + CompletionPath(wt.CompletionToken)
			}
			out[i] = BatchItem{Status: br.Status, Replayed: wt.Replayed, Watch: wt}
		}
	}
	return writeJSON(w, http.StatusOK, BatchResponse{Results: out})
}

// refusedItem answers an item with its error; an internal one is logged
// and shown as "internal error", as on every route.
func (s *Server) refusedItem(r *http.Request, err error) BatchItem {
	code := vigil.ErrorCode(err)
	if code == vigil.CodeInternal {
		s.log.ErrorContext(r.Context(), "batch item failed", "request_id", requestIDFrom(r.Context()), "err", err)
	}
	return BatchItem{Status: vigil.BatchRefused, Error: &BatchError{Code: code, Message: vigil.ErrorMessage(err), Field: vigil.ErrorField(err)}}
}

// decodeBatch reads the envelope {"watches": [...]} and returns its items
// undecoded. The body is bounded (checkBody).
func decodeBatch(r *http.Request) ([]json.RawMessage, error) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, invalid("", "the request body is empty; send {\"watches\": [...]}")
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, decodeError(err)
	}
	items, ok := quickBatch(b)
	if !ok {
		if items, err = splitBatch(b); err != nil {
			return nil, err
		}
	}
	switch {
	case len(items) == 0:
		return nil, invalid("watches", "a batch holds 1 to %d watches; this one holds none", vigil.MaxBatch)
	case len(items) > vigil.MaxBatch:
		return nil, vigil.FieldErrorf(vigil.CodePayloadTooLarge, "watches", "a batch holds at most %d watches; this one holds %d: split it", vigil.MaxBatch, len(items))
	}
	return items, nil
}

// splitBatch reads the envelope with encoding/json, refusing what is not
// {"watches": [...]}.
func splitBatch(b []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err != nil {
			return nil, decodeError(err)
		}
		return nil, invalid("", "the request body must be a JSON object {\"watches\": [...]}")
	}
	var items []json.RawMessage
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, decodeError(err)
		}
		key, _ := tok.(string)
		if key != "watches" {
			return nil, invalid(clip(key), "unknown field %q; a batch is {\"watches\": [...]}", clip(key))
		}
		if seen {
			return nil, invalid("watches", "the key \"watches\" is given twice")
		}
		seen = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, decodeError(err)
		}
		if !bytes.HasPrefix(raw, []byte("[")) {
			return nil, invalid("watches", "watches must be an array of registrations")
		}
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, decodeError(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("", "the request body holds more than one JSON value")
	}
	if !seen {
		return nil, invalid("watches", "watches is required: an array of 1 to %d registrations", vigil.MaxBatch)
	}
	return items, nil
}

// decodeItem decodes one registration of a batch as POST /v1/watches
// decodes its body: an object, no unknown field, no key given twice.
func decodeItem(raw json.RawMessage) (vigil.RegisterRequest, error) {
	var req vigil.RegisterRequest
	if len(raw) == 0 || raw[0] != '{' {
		return req, invalid("", "this item is not a JSON object; each item of watches is a registration object")
	}
	if quickRegister(raw, &req) {
		return req, nil
	}
	if err := duplicateKey(raw); err != nil {
		return req, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, decodeError(err)
	}
	return req, nil
}
