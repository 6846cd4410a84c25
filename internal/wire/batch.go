package wire

import (
	"encoding/json"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/jsonscan"
)

// BatchResponse is the answer of POST /v1/watches/batch: one result per
// item of the request's "watches", in the same order.
type BatchResponse struct {
	Results []BatchItem `json:"results"`
}

// BatchItem answers one item of a batch registration. Status is
// vigil.BatchCreated or vigil.BatchExisting with Watch (Replayed when the
// answer came from the idempotency ledger), or vigil.BatchRefused with
// Error, the API's one error shape.
type BatchItem struct {
	Status   string       `json:"status"`
	Replayed bool         `json:"replayed,omitempty"`
	Watch    *vigil.Watch `json:"watch,omitempty"`
	Error    *BatchError  `json:"error,omitempty"`
}

// BatchError is a refused item's error: its stable code, a sentence, and
// the field at fault.
type BatchError struct {
	Code    vigil.Code `json:"code"`
	Message string     `json:"message"`
	Field   string     `json:"field,omitempty"`
}

// AppendJSON appends the answer as encoding/json writes it (the test holds
// the two equal), in one pass: encoding/json would scan each watch's
// bytes again after Watch.MarshalJSON wrote them, a thousand per answer.
func (r BatchResponse) AppendJSON(b []byte) ([]byte, error) {
	if r.Results == nil {
		return append(b, `{"results":null}`...), nil
	}
	b = append(b, `{"results":[`...)
	for i, it := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"status":`...)
		b = appendString(b, it.Status)
		if it.Replayed {
			b = append(b, `,"replayed":true`...)
		}
		if it.Watch != nil {
			w, err := it.Watch.MarshalJSON()
			if err != nil {
				return nil, err
			}
			b = append(append(b, `,"watch":`...), w...)
		}
		if it.Error != nil {
			e, err := json.Marshal(it.Error)
			if err != nil {
				return nil, err
			}
			b = append(append(b, `,"error":`...), e...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendString appends s as encoding/json writes a string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// UnmarshalJSON implements json.Unmarshaler. The answer as the daemon
// writes it (AppendJSON) is read without reflection, each watch by
// vigil.Watch.UnmarshalJSON: encoding/json's reflection over a thousand
// items cost the Go client more than the rest of a batch call. Anything
// else (a key it does not know or that comes twice, an escape, a null) is
// left to encoding/json, whose answer and errors stay as they were
// (TestBatchResponseQuickMatches).
func (r *BatchResponse) UnmarshalJSON(b []byte) error {
	if quickBatchResponse(b, r) {
		return nil
	}
	type batchResponse BatchResponse // without this method
	return json.Unmarshal(b, (*batchResponse)(r))
}

// quickBatchResponse decodes b into r if it reads all of it exactly as
// encoding/json would; it reports false, having changed nothing, if not.
func quickBatchResponse(b []byte, r *BatchResponse) bool {
	s := jsonscan.Scanner{B: b}
	s.Space()
	if !s.Byte('{') {
		return false
	}
	s.Space()
	if key, ok := s.PlainString(); !ok || key != "results" {
		return false
	}
	s.Space()
	if !s.Byte(':') {
		return false
	}
	s.Space()
	if !s.Byte('[') {
		return false
	}
	results := []BatchItem{}
	s.Space()
	if !s.Byte(']') {
		for {
			s.Space()
			it, ok := batchItem(&s)
			if !ok {
				return false
			}
			results = append(results, it)
			s.Space()
			if s.Byte(']') {
				break
			}
			if !s.Byte(',') {
				return false
			}
		}
	}
	s.Space()
	if !s.Byte('}') || !s.End() {
		return false
	}
	r.Results = results
	return true
}

// batchItem reads one item of a batch answer.
func batchItem(s *jsonscan.Scanner) (BatchItem, bool) {
	var it BatchItem
	var seen [4]bool
	ok := s.Object(func(key string) bool {
		var ok bool
		switch key {
		case "status":
			if seen[0] {
				return false
			}
			seen[0] = true
			it.Status, ok = s.PlainString()
		case "replayed":
			if seen[1] {
				return false
			}
			seen[1] = true
			it.Replayed, ok = s.Boolean()
		case "watch":
			if seen[2] || s.I >= len(s.B) || s.B[s.I] != '{' {
				return false
			}
			seen[2] = true
			v, read := s.Skip()
			it.Watch = new(vigil.Watch)
			ok = read && it.Watch.UnmarshalJSON(v) == nil
		case "error":
			if seen[3] || s.I >= len(s.B) || s.B[s.I] != '{' {
				return false
			}
			seen[3] = true
			v, read := s.Skip()
			it.Error = new(BatchError)
			ok = read && json.Unmarshal(v, it.Error) == nil
		}
		return ok
	})
	return it, ok
}
