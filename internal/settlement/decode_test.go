package settlement_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
)

// TestDecodeOutcome: an outcome and an observation with every field set
// read back as they were written, facts' numbers as json.Number with
// every digit; null is none, and text that is not one JSON value an
// error. A field added to vigil.Outcome or vigil.Observation fails here
// until the stores' decoding reads it.
func TestDecodeOutcome(t *testing.T) {
	t.Parallel()
	obs := &vigil.Observation{Verdict: vigil.VerdictFailed, At: time.Date(2026, 12, 1, 12, 0, 0, 5_000_000, time.UTC), Summary: "s",
		Facts:  map[string]any{"big": json.Number("1234567890123456789"), "l": []any{json.Number("0.1"), "x", true, nil}, "m": map[string]any{"n": json.Number("-3")}},
		Reason: "r", Permanent: true}
	out := &vigil.Outcome{State: vigil.StateFailed, Sentence: "it failed", Attention: true, Held: true, Reason: "failed", Observation: obs}
	for _, v := range []any{*obs, *out} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Type().Field(i).Tag.Get("json") == "-" {
				continue // never stored (Observation.Read): see below
			}
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is not set in this test: set it, and decode it in settlement.Decode*", v, rv.Type().Field(i).Name)
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := settlement.DecodeOutcome(b)
	if err != nil || !cmp.Equal(got, out) {
		t.Errorf("DecodeOutcome(%s) = %+v, %v; want %+v (%s)", b, got, err, out, cmp.Diff(out, got))
	}
	if b, err = json.Marshal(obs); err != nil {
		t.Fatal(err)
	}
	gotObs, err := settlement.DecodeObservation(b)
	if err != nil || !cmp.Equal(gotObs, obs) {
		t.Errorf("DecodeObservation(%s) = %+v, %v; want %+v", b, gotObs, err, obs)
	}
	// What is never stored is never written: a decoded observation has
	// none of it.
	withRead := *obs
	withRead.Read = obs.At
	if b, err := json.Marshal(withRead); err != nil {
		t.Fatal(err)
	} else if got, err := settlement.DecodeObservation(b); err != nil || !got.Read.IsZero() || !cmp.Equal(got, obs) {
		t.Errorf("an observation's Read was written: %s decodes to %+v, %v", b, got, err)
	}
	if o, err := settlement.DecodeOutcome([]byte("null")); o != nil || err != nil {
		t.Errorf("DecodeOutcome(null) = %+v, %v; want nil, nil", o, err)
	}
	if o, err := settlement.DecodeObservation([]byte("null")); o != nil || err != nil {
		t.Errorf("DecodeObservation(null) = %+v, %v; want nil, nil", o, err)
	}
	for _, bad := range []string{"", "[", `{"verdict":"x"} {}`, `{"verdict":"x","at":"yesterday"}`, `{"facts":[1]}`} {
		if o, err := settlement.DecodeObservation([]byte(bad)); err == nil {
			t.Errorf("DecodeObservation(%q) = %+v, want an error", bad, o)
		}
		if o, err := settlement.DecodeOutcome([]byte(`{"observation":` + bad + `}`)); err == nil {
			t.Errorf("DecodeOutcome(observation %q) = %+v, want an error", bad, o)
		}
	}
}
