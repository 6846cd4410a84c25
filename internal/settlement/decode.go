package settlement

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/vigil-run/vigil"
)

// observationJSON is the stored shape of a vigil.Observation (what its
// MarshalJSON writes).
type observationJSON struct {
	Verdict   vigil.Verdict  `json:"verdict"`
	At        string         `json:"at"`
	Summary   string         `json:"summary"`
	Facts     map[string]any `json:"facts"`
	Reason    string         `json:"reason"`
	Permanent bool           `json:"permanent"`
}

func (j *observationJSON) observation() (*vigil.Observation, error) {
	if j == nil {
		return nil, nil
	}
	at, err := vigil.ParseTime(j.At)
	if err != nil {
		return nil, err
	}
	return &vigil.Observation{Verdict: j.Verdict, At: at, Summary: j.Summary, Facts: j.Facts, Reason: j.Reason, Permanent: j.Permanent}, nil
}

// outcomeJSON is the stored shape of a vigil.Outcome.
type outcomeJSON struct {
	State       vigil.State      `json:"state"`
	Sentence    string           `json:"sentence"`
	Attention   bool             `json:"attention"`
	Held        bool             `json:"held"`
	Reason      string           `json:"reason"`
	Observation *observationJSON `json:"observation"`
}

// DecodeObservation decodes a stored observation (JSON null: nil) as
// json.Unmarshal would, but for the numbers of its facts, which are
// json.Number, as a probe's are: decoded as float64, an integer past 2^53
// came back rounded, so a delivery retried after a restart (its body built
// from the stored watch) did not carry the first attempt's bytes.
func DecodeObservation(b []byte) (*vigil.Observation, error) {
	var j *observationJSON
	if err := decodeNumbers(b, &j); err != nil {
		return nil, err
	}
	return j.observation()
}

// DecodeOutcome decodes a stored outcome (JSON null: nil) as
// DecodeObservation does its observation.
func DecodeOutcome(b []byte) (*vigil.Outcome, error) {
	var j *outcomeJSON
	if err := decodeNumbers(b, &j); err != nil || j == nil {
		return nil, err
	}
	obs, err := j.Observation.observation()
	if err != nil {
		return nil, err
	}
	return &vigil.Outcome{State: j.State, Sentence: j.Sentence, Attention: j.Attention, Held: j.Held, Reason: j.Reason, Observation: obs}, nil
}

// decodeNumbers decodes the one JSON value of b into dst, numbers in
// interfaces as json.Number.
func decodeNumbers(b []byte, dst any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(dst); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("invalid character after top-level value")
	}
	return nil
}
