package wire

import "github.com/vigil-run/vigil"

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
