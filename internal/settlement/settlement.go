// Package settlement checks a batch of settlements, or a cancel, and
// encodes what every store writes for each of them (the outcome and last
// observation as JSON text, the outcome message with its defaults), and
// decodes that JSON back with its facts' numbers exact, once for every
// store.
package settlement

import (
	"encoding/json"
	"fmt"

	"github.com/vigil-run/vigil"
)

// Prepared is one vigil.WatchSettleParams, checked and encoded: its
// outcome and last observation as JSON text (nil: NULL, the observation
// kept as it was), and its outcome message with its defaults filled in
// (nil: none).
type Prepared struct {
	Outcome, LastObs *string
	Message          *vigil.Message
}

// Prepare checks each entry of ps and encodes it; store names the store in
// the errors that are not the caller's (an outcome that does not encode).
// A message's WatchID, Type and CreatedAt default to the watch's id, the
// outcome's type and SettledAt; its Recipient is left to the store, which
// knows the watch's. Entries that share one outcome (a batch of timers)
// share its encoding.
func Prepare(store string, ps []vigil.WatchSettleParams) ([]Prepared, error) {
	out := make([]Prepared, len(ps))
	for i := range ps {
		p := &ps[i]
		if !p.State.Terminal() {
			return nil, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: cannot settle as %q, which is not a settled state", p.ID, p.State)
		}
		if p.SettledAt.IsZero() {
			return nil, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: settling needs the time it settled", p.ID)
		}
		switch {
		case p.Outcome == nil:
		case i > 0 && p.Outcome == ps[i-1].Outcome:
			out[i].Outcome, out[i].LastObs = out[i-1].Outcome, out[i-1].LastObs
		default:
			b, err := JSON(p.Outcome)
			if err != nil {
				return nil, fmt.Errorf("%s: watch %s: encode outcome: %w", store, p.ID, err)
			}
			out[i].Outcome = text(b)
			if o := p.Outcome.Observation; o != nil {
				if b, err = JSON(o); err != nil {
					return nil, fmt.Errorf("%s: watch %s: encode observation: %w", store, p.ID, err)
				}
				out[i].LastObs = text(b)
			}
		}
		if p.Message != nil {
			m := *p.Message
			if m.ID == "" {
				return nil, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: the outcome message has no id", p.ID)
			}
			if m.WatchID == "" {
				m.WatchID = p.ID
			}
			if m.Type == "" {
				m.Type = vigil.MessageTypeFor(p.State)
			}
			if m.CreatedAt.IsZero() {
				m.CreatedAt = p.SettledAt
			}
			out[i].Message = &m
		}
	}
	return out, nil
}

// Cancel checks a cancel and encodes what a store writes for it, as
// Prepare does for a settlement: the outcome as JSON text (nil: NULL) and
// the cancel message, if any, whose WatchID, Type and CreatedAt default to
// the watch's id, cancelled and SettledAt. LastObs stays nil: a cancel
// keeps the watch's last observation.
func Cancel(store string, p vigil.WatchCancelParams) (Prepared, error) {
	var out Prepared
	if p.Outcome != nil {
		b, err := JSON(p.Outcome)
		if err != nil {
			return Prepared{}, fmt.Errorf("%s: watch %s: encode outcome: %w", store, p.ID, err)
		}
		out.Outcome = text(b)
	}
	if p.SettledAt.IsZero() {
		return Prepared{}, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: cancelling needs the time it settled", p.ID)
	}
	if p.Message != nil {
		m := *p.Message
		if m.WatchID == "" {
			m.WatchID = p.ID
		}
		if m.Type == "" {
			m.Type = vigil.MessageCancelled
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = p.SettledAt
		}
		out.Message = &m
	}
	return out, nil
}

// BaselineHolds reports whether a watch's stored last observation, its
// column's text (nil: NULL), is still baseline: the check of a standing
// watch's change (vigil.WatchObserveParams.Baseline). A column that cannot
// be read is not the baseline.
func BaselineHolds(stored *string, baseline *vigil.Observation) bool {
	var o *vigil.Observation
	if stored != nil && *stored != "null" {
		o = new(vigil.Observation)
		if err := json.Unmarshal([]byte(*stored), o); err != nil {
			return false
		}
	}
	return o.IsBaseline(baseline)
}

func text(b []byte) *string {
	s := string(b)
	return &s
}

// JSON encodes v as a store's JSON column holds it: an outcome or an
// observation writes itself (encoding/json would reflect over it and then
// parse what its MarshalJSON wrote once more), anything else goes through
// encoding/json. A nil outcome or observation is JSON null, as encoding/json
// writes it.
func JSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case *vigil.Outcome:
		if x != nil {
			return x.AppendJSON(make([]byte, 0, 256))
		}
	case *vigil.Observation:
		if x != nil {
			return x.AppendJSON(make([]byte, 0, 128))
		}
	}
	return json.Marshal(v)
}
