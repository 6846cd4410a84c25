// Package vigil is the domain of the vigil watch service: watches, their
// kinds, states and verdicts, observations and outcomes, mailbox messages, the
// error model, the Store and Service interfaces, and the pure rules that
// decide how a watch moves between states.
//
// The package imports only the standard library. Adapters (the SQLite store,
// the HTTP API, the watchers) live in their own packages and depend on it.
package vigil

import (
	"bytes"
	"encoding/json"
	"time"
)

// Kind names a predicate family; each kind has exactly one watcher.
type Kind string

// The kinds vigil knows. A build may register watchers for only some of them.
const (
	KindTimer    Kind = "timer"
	KindHTTP     Kind = "http"
	KindTCP      Kind = "tcp"
	KindFile     Kind = "file"
	KindCommand  Kind = "command"
	KindRun      Kind = "run"
	KindCI       Kind = "ci"
	KindTicket   Kind = "ticket"
	KindFolder   Kind = "folder"
	KindToken    Kind = "token"
	KindSchedule Kind = "schedule"
)

// State is where a watch is in its life. See docs/state_machine.md.
type State string

// The states of a watch. Pending is the only non-terminal state.
const (
	// StatePending: registered and being checked.
	StatePending State = "pending"
	// StateFired: the condition held (for mode unless, it happened, or the
	// window passed without it: see Outcome.Held).
	StateFired State = "fired"
	// StateFailed: the condition can now never hold.
	StateFailed State = "failed"
	// StateExpired: the deadline passed without an answer.
	StateExpired State = "expired"
	// StateCancelled: cancelled by a user, by the recipient closing, or by
	// revocation.
	StateCancelled State = "cancelled"
	// StateErrored: a permanent error, or max_polls / max_errors reached.
	StateErrored State = "errored"
	// StateUnwatchable: no watcher for this kind in this build. Shown for
	// rows written by a newer build; never written by this one. Such a
	// row expires at its deadline (reason "no_watcher").
	StateUnwatchable State = "unwatchable"
)

// Terminal reports whether s is a settled state.
func (s State) Terminal() bool {
	switch s {
	case StateFired, StateFailed, StateExpired, StateCancelled, StateErrored:
		return true
	}
	return false
}

// Valid reports whether s is one of the states above.
func (s State) Valid() bool { return s == StatePending || s == StateUnwatchable || s.Terminal() }

// Verdict is what one probe answers. Only satisfied and failed are answers.
type Verdict string

// The four verdicts of SPEC §1.1.
const (
	VerdictSatisfied   Verdict = "satisfied"
	VerdictFailed      Verdict = "failed"
	VerdictPending     Verdict = "pending"
	VerdictUnavailable Verdict = "unavailable"
)

// Mode is a watch's polarity (SPEC §1.3).
type Mode string

// The two polarities. The zero value means ModeUntil.
const (
	ModeUntil  Mode = "until"
	ModeUnless Mode = "unless"
)

// Observation is what one probe returned: a verdict and the frozen facts all
// wording is built from.
type Observation struct {
	Verdict Verdict `json:"verdict"`
	At      time.Time
	// Summary is one line a person can read ("HTTP 200, status.phase = \"Ready\"").
	Summary string `json:"summary,omitempty"`
	// Facts are the numbers, ids and texts the summary was made from.
	Facts map[string]any `json:"facts,omitempty"`
	// Reason says why the probe could not tell (verdict unavailable).
	Reason string `json:"reason,omitempty"`
	// Permanent marks an unavailable answer that will never change.
	Permanent bool `json:"permanent,omitempty"`
	// Read is when the answer judged was read from its source, for a
	// watcher that reads through a cache shared between probes (ci and
	// ticket: the forge's): probes answered from one cached read carry
	// one Read, and count once toward stable (see Progress.AdvanceRead).
	// Zero for a watcher that reads afresh on every probe. It lives in
	// memory only: it is neither stored nor shown.
	Read time.Time `json:"-"`
}

// Same reports whether o and p say the same thing, ignoring when they were
// made. A probe whose observation is the Same as the last one writes nothing.
func (o *Observation) Same(p *Observation) bool {
	if o == nil || p == nil {
		return o == p
	}
	if o.Verdict != p.Verdict || o.Summary != p.Summary || o.Reason != p.Reason || o.Permanent != p.Permanent {
		return false
	}
	if len(o.Facts) == 0 && len(p.Facts) == 0 {
		return true
	}
	a, err1 := json.Marshal(o.Facts)
	b, err2 := json.Marshal(p.Facts)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// IsBaseline reports whether o, a watch's stored last observation, is still
// baseline, the one a probe read before it found a change: both none, or
// both made at the same instant (each write of a standing watch's baseline
// is a probe's own observation, stamped with the time of that probe).
func (o *Observation) IsBaseline(baseline *Observation) bool {
	if o == nil || baseline == nil {
		return o == baseline
	}
	return o.At.Equal(baseline.At)
}

// Outcome is how a watch settled: the state, the one sentence, and the frozen
// observation it was built from.
type Outcome struct {
	State    State  `json:"state"`
	Sentence string `json:"sentence"`
	// Attention marks bad news (an unless watch whose condition happened, a failure).
	Attention bool `json:"attention,omitempty"`
	// Held marks an unless watch whose window passed without the condition.
	Held bool `json:"held,omitempty"`
	// Reason is a short machine word for why it settled: "satisfied",
	// "failed", "deadline", "permanent", "max_polls", "max_errors",
	// "cancelled", "recipient_closed", "revoked", "down_past_deadline",
	// "no_watcher" (expired at its deadline: no watcher for its kind ran
	// in this build).
	Reason      string       `json:"reason"`
	Observation *Observation `json:"observation,omitempty"`
}

// Receipt records what became of pushing a settlement to one channel.
type Receipt struct {
	Channel   string    `json:"channel"`
	Status    string    `json:"status"`
	Attempts  int       `json:"attempts"`
	Detail    string    `json:"detail,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Watch is one registered request.
type Watch struct {
	ID        string
	Kind      Kind
	Predicate json.RawMessage
	Recipient string
	State     State
	Mode      Mode
	// Every is the re-check interval; zero for kinds that do not probe.
	Every time.Duration
	// Deadline is when the watch expires; zero for standing watches.
	Deadline time.Time
	// StartAt is the first instant the watch is due (a timer's "at"); zero
	// means at creation.
	StartAt   time.Time
	CreatedAt time.Time
	// NextDue is when the next probe runs, while pending. It lives in the
	// scheduler's memory and is never stored.
	NextDue   time.Time
	SettledAt time.Time
	Polls     int
	// Errors counts the probes that could not tell (verdict unavailable);
	// ConsecutiveErrors those since the last probe that could, which
	// MaxErrors bounds.
	Errors            int
	ConsecutiveErrors int
	// CheckedAt is when the latest probe was made; LastObservation.At is
	// when what it says was first seen. While a watch is pending, Polls,
	// the error counts and CheckedAt are the scheduler's live figures on
	// every surface; the store holds them as of its last write.
	CheckedAt time.Time
	// LastObservation is the latest observation that differed from the one
	// before it.
	LastObservation *Observation
	Outcome         *Outcome
	Receipts        []Receipt
	Note            string
	Labels          map[string]string
	Stable          int
	StableFor       time.Duration
	MaxPolls        int
	MaxErrors       int
	Standing        bool
	Deliver         json.RawMessage
	ChainDepth      int
	TokenID         string
	// AnsweredAtCreation marks a watch whose first observation, returned to
	// the registering caller, already settled it; nothing was mailed.
	AnsweredAtCreation bool
	// Existing is set on a registration that matched a pending watch.
	Existing bool
	// AskedDeadline is set on such a registration when it asked for a
	// deadline other than the one the pending watch keeps: what it asked
	// for, so the answer can say it was not taken.
	AskedDeadline time.Time
	// AskedDeliver is set on such a registration when it asked for
	// delivery options (a webhook, a command, an email, a resume, progress)
	// that the pending watch does not carry as asked: what it asked for,
	// its secrets redacted, so the answer can say they were not
	// registered. The pending watch keeps its own: another registration's
	// resume is never replaced.
	AskedDeliver json.RawMessage
	// Replayed is set on a registration answered from the idempotency ledger.
	Replayed bool
	// Identity is the hash of (recipient, kind, mode, canonical predicate).
	Identity string
	// CompletionToken is a token watch's bearer capability: set only on
	// the response to the registration that created it, never stored
	// (the predicate holds its hash) and never shown again.
	CompletionToken string
	// CompletionURL is where to POST the completion, when the surface
	// that answered the registration knows its own address (the HTTP API).
	CompletionURL string
	// Unreadable says why the stored row could not be read in full (a
	// column that does not decode, named with what is wrong); the other
	// fields hold what could be read. Such a watch is listed like any
	// other, and its next probe settles it errored, once.
	Unreadable string
}

// MessageType is the type of a mailbox message.
type MessageType string

// Message types (SPEC §6). The first five are outcome messages: a watch has at
// most one of them, ever.
const (
	MessageFired     MessageType = "fired"
	MessageFailed    MessageType = "failed"
	MessageExpired   MessageType = "expired"
	MessageErrored   MessageType = "errored"
	MessageCancelled MessageType = "cancelled"
	MessageChanged   MessageType = "changed"
	MessageNote      MessageType = "note"
)

// MessageTypeFor returns the outcome message type for a terminal state.
func MessageTypeFor(s State) MessageType { return MessageType(s) }

// Message is one entry of a recipient's mailbox.
type Message struct {
	Seq       int64           `json:"seq"`
	ID        string          `json:"id"`
	Recipient string          `json:"recipient"`
	WatchID   string          `json:"watch_id,omitempty"`
	Type      MessageType     `json:"type"`
	Text      string          `json:"text"`
	Data      json.RawMessage `json:"data,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}
