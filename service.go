package vigil

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Service is what every surface (HTTP API, CLI through the client, MCP)
// offers. The engine implements it in-process; package client implements
// it over HTTP. Calls act within the Scope found in ctx (see WithScope).
type Service interface {
	// Register creates a watch, or returns the pending one with the same
	// identity (Existing) or the one recorded under the idempotency key
	// (Replayed).
	Register(ctx context.Context, r RegisterRequest) (*Watch, error)
	// RegisterBatch registers up to MaxBatch watches in one durable
	// transaction and answers each item, in order, as Register would:
	// created, existing (or replayed), or refused with its error. Only a
	// call that is wrong as a whole (no items, more than MaxBatch) is
	// refused whole, and then nothing is written.
	RegisterBatch(ctx context.Context, rs []RegisterRequest) ([]BatchResult, error)
	// Watch returns one watch.
	Watch(ctx context.Context, id string) (*Watch, error)
	// Watches lists watches.
	Watches(ctx context.Context, q ListRequest) (WatchPage, error)
	// Why returns a watch with one sentence on why it has not settled (or
	// how it did).
	Why(ctx context.Context, id string) (*Why, error)
	// Wait blocks until the watch settles or timeout passes (bounded by
	// Limits.MaxWait) and returns it as it is then.
	Wait(ctx context.Context, id string, timeout time.Duration) (*Watch, error)
	// Cancel cancels a pending watch, leaving one neutral line in the
	// mailbox. Cancelling a settled watch returns it unchanged.
	Cancel(ctx context.Context, id string) (*Watch, error)
	// Check makes one immediate probe of a pending watch and returns the
	// watch once what it found is written. A settled watch is a conflict.
	Check(ctx context.Context, id string) (*Watch, error)
	// Delete removes a watch; a pending one is cancelled first.
	Delete(ctx context.Context, id string) error
	// Messages reads a mailbox, long-polling up to r.Wait.
	Messages(ctx context.Context, r MessagesRequest) (MessagesPage, error)
	// Ack moves a reader's cursor.
	Ack(ctx context.Context, r AckRequest) error
	// CloseRecipient cancels a recipient's pending watches silently.
	CloseRecipient(ctx context.Context, recipient string) (CloseResult, error)
	// Subscribe streams events until ctx is done; the channel is closed then.
	Subscribe(ctx context.Context, f EventFilter) (<-chan Event, error)
	// Complete settles the token watch whose completion token r.Token is:
	// status "success" fires it, "failure" fails it. The token is the
	// caller's only credential (no scope applies). An unknown or wrong
	// token is not_found; a token whose watch has already settled is
	// conflict, and changes nothing.
	Complete(ctx context.Context, r CompleteRequest) (*Watch, error)
	// Note leaves a note (a title and an optional body) in a recipient's
	// mailbox without a watch, delivered like an outcome to its readers.
	// A recipient the caller may not act for is not_found.
	Note(ctx context.Context, r NoteRequest) (*Message, error)
}

// NoteRequest is the body of POST /v1/recipients/{r}/notes, with the
// recipient.
type NoteRequest struct {
	Recipient string `json:"-"`
	// Title is one line: what the note is about.
	Title string `json:"title"`
	// Body is the note itself; may be empty.
	Body string `json:"body,omitempty"`
}

// Bounds of a note.
const (
	MaxNoteTitleBytes = 200
	MaxNoteBodyBytes  = 16 << 10
)

// NoteData is the data of a note message.
type NoteData struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	// From is the id of the scoped token that wrote the note; empty for
	// the admin.
	From string `json:"from,omitempty"`
}

// ValidNote checks a note's title and body: a title of one line of
// printable text (no control character, no bidi control) within
// MaxNoteTitleBytes, a body of valid UTF-8 within
// MaxNoteBodyBytes. The refusal names the field at fault.
func ValidNote(title, body string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return FieldErrorf(CodeInvalidRequest, "title", "a note needs a title")
	case len(title) > MaxNoteTitleBytes:
		return FieldErrorf(CodeInvalidRequest, "title", "the title is %d bytes; at most %d", len(title), MaxNoteTitleBytes)
	case !utf8.ValidString(title) || strings.IndexFunc(title, func(r rune) bool { return unicode.IsControl(r) || BidiControl(r) }) >= 0:
		// A bidi control would make the line, which reaches other
		// agents' prompts as it is, read in another order than written.
		return FieldErrorf(CodeInvalidRequest, "title", "the title must be one line of text (UTF-8, no control characters, no bidi controls)")
	case len(body) > MaxNoteBodyBytes:
		return FieldErrorf(CodeInvalidRequest, "body", "the body is %d bytes; at most %d", len(body), MaxNoteBodyBytes)
	case !utf8.ValidString(body) || strings.ContainsRune(body, 0):
		return FieldErrorf(CodeInvalidRequest, "body", "the body must be UTF-8 text")
	}
	return nil
}

// CompleteRequest is the body of POST /v1/complete/{token}, with the token.
type CompleteRequest struct {
	// Token is the completion token returned once at registration.
	Token string `json:"-"`
	// Status is "success" or "failure".
	Status string `json:"status"`
	// Data is an optional JSON object carried into the outcome's facts.
	Data json.RawMessage `json:"data,omitempty"`
}

// The statuses of a CompleteRequest.
const (
	CompleteSuccess = "success"
	CompleteFailure = "failure"
)

// RegisterRequest is the body of POST /v1/watches (SPEC §3).
type RegisterRequest struct {
	Kind      Kind            `json:"kind"`
	Predicate json.RawMessage `json:"predicate,omitempty"`
	Recipient string          `json:"recipient"`
	// Deadline is a duration from now or an RFC 3339 time; "" for the default.
	Deadline string `json:"deadline,omitempty"`
	// Every is the re-check interval; "" for the kind's default.
	Every          string            `json:"every,omitempty"`
	Mode           Mode              `json:"mode,omitempty"`
	Note           string            `json:"note,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Deliver        json.RawMessage   `json:"deliver,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	MaxPolls       int               `json:"max_polls,omitempty"`
	MaxErrors      int               `json:"max_errors,omitempty"`
	Stable         int               `json:"stable,omitempty"`
	StableFor      string            `json:"stable_for,omitempty"`
	// Observe waits (bounded) for the first observation and returns it.
	Observe bool `json:"observe,omitempty"`
	// ChainDepth is how deep in a chain of vigil-started commands the caller
	// is (VIGIL_CHAIN_DEPTH); set by the transport, not the body.
	ChainDepth int `json:"-"`
}

// MaxBatch is the most watches one RegisterBatch call may hold.
const MaxBatch = 1000

// The statuses of a BatchResult.
const (
	BatchCreated  = "created"
	BatchExisting = "existing"
	BatchRefused  = "refused"
)

// BatchResult answers one item of RegisterBatch: Status BatchCreated or
// BatchExisting with the Watch (Watch.Replayed when it came from the
// idempotency ledger), or BatchRefused with Err, a *Error with its code.
type BatchResult struct {
	Status string
	Watch  *Watch
	Err    error
}

// ListRequest filters Service.Watches.
type ListRequest struct {
	Recipient string            `json:"recipient,omitempty"`
	State     State             `json:"state,omitempty"`
	Kind      Kind              `json:"kind,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Text keeps the watches whose note or predicate holds it, ignoring
	// case (at most MaxListText bytes).
	Text  string `json:"text,omitempty"`
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// MaxListText bounds ListRequest.Text.
const MaxListText = 200

// Why explains a watch in one sentence.
type Why struct {
	Watch    *Watch `json:"watch"`
	Sentence string `json:"sentence"`
}

// MessagesRequest reads a mailbox.
type MessagesRequest struct {
	Recipient string
	Reader    string
	After     *int64
	Wait      time.Duration
	Ack       bool
	Limit     int
}

// AckRequest acknowledges messages up to Seq for a reader.
type AckRequest struct {
	Recipient string `json:"recipient"`
	Reader    string `json:"reader"`
	Seq       int64  `json:"seq"`
}

// CloseResult says what closing a recipient did.
type CloseResult struct {
	Cancelled int `json:"cancelled"`
}

// EventFilter selects events; empty fields do not filter.
type EventFilter struct {
	Recipient string
	WatchID   string
	// After, when set, resumes a stream: it first carries, as
	// message.created events, the messages the filter selects whose seq
	// is after *After (what was settled while the subscriber was away),
	// then goes on live. The event stream sets it from Last-Event-ID.
	// On every stream, resumed or not, each message event comes once and
	// in seq order (a stream not resumed starts after the newest message
	// when it subscribes), so the Seq of the last one received is a
	// point before which the subscriber has every message it selects.
	After *int64
}

// Event types on the event stream.
const (
	EventWatchCreated  = "watch.created"
	EventWatchSettled  = "watch.settled"
	EventWatchProgress = "watch.progress"
	EventWatchObserved = "watch.observed"
	EventMessage       = "message.created"
)

// Event is one entry on the event stream.
type Event struct {
	Type      string `json:"type"`
	WatchID   string `json:"watch_id,omitempty"`
	Recipient string `json:"recipient,omitempty"`
	State     State  `json:"state,omitempty"`
	Polls     int    `json:"polls,omitempty"`
	Text      string `json:"text,omitempty"`
	// Done is set on watch.settled so a live status line can disappear.
	Done bool `json:"done,omitempty"`
	// Seq is the message's seq on message.created.
	Seq int64     `json:"seq,omitempty"`
	At  time.Time `json:"-"`
}

// MessageEvent is the message.created event that announces m: the event
// the event stream sends again for m when a subscriber resumes.
func MessageEvent(m *Message) Event {
	state := StatePending // a change or a note of a pending watch
	switch m.Type {
	case MessageFired, MessageFailed, MessageExpired, MessageErrored, MessageCancelled:
		state = State(m.Type)
	}
	if m.WatchID == "" {
		state = "" // a note between agents: no watch, no state
	}
	return Event{Type: EventMessage, WatchID: m.WatchID, Recipient: m.Recipient, State: state, Text: m.Text, Seq: m.Seq, At: m.CreatedAt}
}

// Scope is what the caller may do. No scope in a context means the admin.
type Scope struct {
	// Recipients the caller acts for; empty means every recipient.
	Recipients []string
	// Exec lets the caller register kinds that run commands.
	Exec bool
	// TokenID is the scoped token's id, recorded on the watches it makes.
	TokenID string
	// Kinds the caller may register; empty means every kind.
	Kinds []Kind
	// Repos limits the repositories the caller's forge watches (ci,
	// ticket) may name: doublestar globs over PROVIDER/REPO
	// ("github/acme/*", "gitlab/group/**"), lowercase. Empty means any
	// repository the daemon's forge credentials can read.
	Repos []string
}

// AllowsKind reports whether the scope may register watches of kind k: k
// is among Kinds (when set), and a kind that runs commands (runsCommands,
// its KindSpec's Exec) needs Exec.
func (s Scope) AllowsKind(k Kind, runsCommands bool) bool {
	if runsCommands && !s.Exec {
		return false
	}
	return len(s.Kinds) == 0 || slices.Contains(s.Kinds, k)
}

type scopeKey struct{}

// WithScope returns ctx carrying s.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the caller's scope; ok is false for the admin.
func ScopeFrom(ctx context.Context) (s Scope, ok bool) {
	s, ok = ctx.Value(scopeKey{}).(Scope)
	return s, ok
}

// Allows reports whether the scope may act for recipient r.
func (s Scope) Allows(r string) bool {
	if len(s.Recipients) == 0 {
		return true
	}
	for _, x := range s.Recipients {
		if x == r {
			return true
		}
	}
	return false
}
