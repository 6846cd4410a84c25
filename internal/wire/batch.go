package wire

import (
	"encoding/json"

	"github.com/vigil-run/vigil"
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
