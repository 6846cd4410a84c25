package vigil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// CanonicalJSON re-encodes a JSON value with object keys sorted and no
// insignificant space, so equal values have equal bytes.
func CanonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v) // maps marshal with sorted keys
}

// Identity returns the identity hash of a watch: (recipient, kind, mode,
// canonical predicate). Among pending watches it is unique. The mode is part
// of identity: "tell me when X" and "tell me if X" are different questions.
func Identity(recipient string, kind Kind, mode Mode, canonicalPredicate json.RawMessage) string {
	if mode == "" {
		mode = ModeUntil
	}
	h := sha256.New()
	for _, s := range []string{recipient, string(kind), string(mode)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(canonicalPredicate)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
