// Package token is the watcher for kind token: a watch that something
// outside vigil settles by calling a secret completion URL. It never
// probes; only the final probe at the deadline runs, and answers pending,
// so the watch expires (24 h by default) unless completed first.
//
// The predicate is empty ({}). Canonicalize makes the secret, 128 random
// bits from crypto/rand spelled in unpadded base64url, and puts only its
// SHA-256 in the canonical predicate:
//
//	{"token_sha256": "9f86d08…"}
//
// so the predicate, listings and the database never hold the secret, and
// every token watch has its own identity. The engine returns the secret
// once, in the registration's completion token, and checks a completion
// against the hash with CheckSecret.
package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// SecretBytes is how many random bytes a secret holds (128 bits).
const SecretBytes = 16

// Config configures the token watcher. It has no settings.
type Config struct{}

// Watcher answers token watches.
type Watcher struct{}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a token watcher.
func New(Config) *Watcher { return &Watcher{} }

type input struct{}

type canonical struct {
	TokenSHA256 string `json:"token_sha256"`
}

// Kind returns vigil.KindToken.
func (*Watcher) Kind() vigil.Kind { return vigil.KindToken }

// Canonicalize makes a new secret: the canonical predicate holds its hash,
// Canonical.Secret the secret itself.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return watcher.Canonical{}, err
	}
	var b [SecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return watcher.Canonical{}, err
	}
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	pred, err := watcher.Encode(canonical{TokenSHA256: hash(secret)})
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: pred, Secret: secret}, nil
}

// Predicate is the canonical predicate of a token watch whose secret is
// secret (one the engine derived rather than Canonicalize made).
func (*Watcher) Predicate(secret string) (json.RawMessage, error) {
	return watcher.Encode(canonical{TokenSHA256: hash(secret)})
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CheckSecret reports, in constant time, whether secret is the one whose
// hash predicate holds.
func (*Watcher) CheckSecret(predicate json.RawMessage, secret string) bool {
	var c canonical
	if err := json.Unmarshal(predicate, &c); err != nil || len(c.TokenSHA256) != 2*sha256.Size || secret == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hash(secret)), []byte(c.TokenSHA256)) == 1
}

// Admit admits every token watch: they need no configuration.
func (*Watcher) Admit(context.Context, json.RawMessage) error { return nil }

// Probe answers pending: only a completion settles a token watch. It runs
// once, at the deadline.
func (*Watcher) Probe(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindToken); err != nil {
		return vigil.Observation{}, err
	}
	return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "the completion URL has not been called"}, nil
}

// Completion returns the observation a completion makes: status success
// is satisfied, failure is failed; data (a JSON object, or nothing) goes
// into its facts.
func (*Watcher) Completion(status string, data json.RawMessage) vigil.Observation {
	facts := map[string]any{"status": status}
	if len(data) > 0 {
		var v any
		if json.Unmarshal(data, &v) == nil && v != nil {
			facts["data"] = v
		}
	}
	if status == vigil.CompleteFailure {
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "completed with status failure", Facts: facts}
	}
	return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "completed with status success", Facts: facts}
}
