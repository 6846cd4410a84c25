package vigil

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Store persists watches, mailboxes, reader cursors and the idempotency
// ledger. Every implementation passes store/storetest. Methods that change a
// watch's state are compare-and-set on state = 'pending'. Times are UTC at
// the boundary; the store never reads the clock: callers pass Now.
type Store interface {
	// WatchCreate registers p.Watch in one transaction: it replays the
	// idempotency ledger, returns a pending watch with the same identity
	// (Existing), enforces the caps, inserts the watch and the ledger entry.
	WatchCreate(ctx context.Context, p WatchCreateParams) (*Watch, error)
	// WatchCreateMany registers each of ps as WatchCreate would, in order,
	// all in ONE transaction (one durable commit), and returns one result
	// per item in the same order. An item sees what the items before it
	// wrote: the same identity again is Existing, the same idempotency key
	// replays, and the caps count the watches created before it. An item
	// that WatchCreate would refuse (idempotency_conflict, quota_exceeded,
	// conflict, invalid_request) gets that error in its result and writes
	// nothing; the other items go on. The error return is for the call as
	// a whole (the store failed, the disk is full): then nothing of the
	// call is written.
	WatchCreateMany(ctx context.Context, ps []WatchCreateParams) ([]WatchCreateResult, error)
	// WatchGet returns one watch, or ErrNotFound.
	WatchGet(ctx context.Context, id string) (*Watch, error)
	// IdempotencyReplay returns what WatchCreate would replay for p's
	// key, without writing: the watch the live ledger entry of
	// (p.Recipient, p.Key) names (not older than p.Since), marked Replayed
	// (and Existing when that registration joined a pending watch), when
	// the entry was written for p.RequestHash. Nil, and no error, when
	// there is none: no live entry, one of another request, or its watch
	// is gone. A registration refused before it reaches WatchCreate (its
	// deadline, an instant, has passed since) asks it, so that a retry of
	// one that was answered replays its answer.
	IdempotencyReplay(ctx context.Context, p IdempotencyReplayParams) (*Watch, error)
	// WatchGetMany returns the watches found among ids, in any order.
	WatchGetMany(ctx context.Context, ids []string) ([]*Watch, error)
	// WatchList returns one page of watches, newest first.
	WatchList(ctx context.Context, p WatchListParams) (WatchPage, error)
	// WatchCounts counts watches by state and kind, among recipients when
	// it is not empty (a scoped caller), for the panel's counts.
	WatchCounts(ctx context.Context, recipients []string) ([]WatchCount, error)
	// WatchListPending returns what the scheduler needs to re-arm every
	// pending watch after a start.
	WatchListPending(ctx context.Context) ([]ScheduleEntry, error)
	// WatchObserve records a pending watch's latest observation and poll
	// count, and the optional change message, in one transaction. It
	// reports false, writing nothing, if the watch is not pending.
	WatchObserve(ctx context.Context, p WatchObserveParams) (bool, error)
	// WatchSettle settles each watch that is still pending, each with its
	// outcome message, all in one transaction, and reports per entry whether
	// it won. A watch already settled is left as it is and reports false.
	WatchSettle(ctx context.Context, ps []WatchSettleParams) ([]bool, error)
	// WatchJoin records that a registration was answered with pending
	// watch id as existing (it waits for the outcome in its mailbox), so
	// that a settlement answered at creation (AnsweredAtCreation) mails
	// its message all the same. It reports false, writing nothing, when
	// the watch is not pending (settled, or no such watch): the caller
	// reads it again. A settlement and a join of one watch are
	// serialized: exactly one of them finds the watch pending first.
	WatchJoin(ctx context.Context, id string) (bool, error)
	// WatchCancel cancels a pending watch with an optional neutral message.
	// It returns the watch as it is afterwards and whether this call
	// cancelled it. ErrNotFound if there is no such watch (or it belongs to
	// another recipient than p.Recipient, when that is set).
	WatchCancel(ctx context.Context, p WatchCancelParams) (*Watch, bool, error)
	// WatchDelete removes a settled watch and its receipts; its mailbox
	// messages stay. ErrConflict if it is still pending.
	WatchDelete(ctx context.Context, id string) error
	// WatchDeliverSet replaces a watch's delivery options, whatever its
	// state (a one-click unsubscribe turns its email off). ErrNotFound if
	// there is no such watch.
	WatchDeliverSet(ctx context.Context, p WatchDeliverSetParams) error
	// RecipientClose cancels every pending watch of a recipient silently and
	// returns their ids.
	RecipientClose(ctx context.Context, p RecipientCloseParams) ([]string, error)
	// MessageCreate appends a message (a standing watch's change, a note).
	MessageCreate(ctx context.Context, m *Message) (*Message, error)
	// MessagesRead returns messages of a recipient in seq order after a
	// cursor: p.After if set, else the reader's stored cursor.
	MessagesRead(ctx context.Context, p MessagesReadParams) (MessagesPage, error)
	// MessagesOfWatch returns the newest messages of one watch (its
	// changes, notes and outcome), at most limit of them, oldest first
	// (seq order). A limit of 0 or above MaxWatchMessages means
	// MaxWatchMessages. It reads that watch's messages alone, through an
	// index, however large its recipient's mailbox.
	MessagesOfWatch(ctx context.Context, watchID string, limit int) ([]*Message, error)
	// MessagesLastSeq returns the seq of the newest message of every
	// mailbox (0 when there is none): where a reader of what comes next
	// starts (a live event stream). A message committed after it returns
	// has a greater seq.
	MessagesLastSeq(ctx context.Context) (int64, error)
	// MessagesAck moves a reader's cursor forward to p.Seq (never back).
	MessagesAck(ctx context.Context, p MessagesAckParams) error
	// Prune deletes settled watches, messages and idempotency entries older
	// than the cut-offs and says when the next one becomes prunable.
	Prune(ctx context.Context, p PruneParams) (PruneResult, error)
	// Close releases the store.
	Close() error

	// ReceiptStore records what became of push deliveries (store_receipt.go).
	ReceiptStore
	// TokenStore keeps scoped API tokens (store_token.go).
	TokenStore
}

// WatchCreateParams are the arguments of Store.WatchCreate.
type WatchCreateParams struct {
	// Watch is complete: ID, Identity, CreatedAt, Deadline, Every resolved.
	Watch *Watch
	// IdempotencyKey, when set, with RequestHash, the hash of the request
	// without the key.
	IdempotencyKey string
	RequestHash    string
	// IdempotencySince: ledger entries older than this are ignored.
	IdempotencySince time.Time
	// Caps on pending watches; zero means no cap.
	MaxActive             int
	MaxActivePerRecipient int
}

// IdempotencyReplayParams are the arguments of Store.IdempotencyReplay.
type IdempotencyReplayParams struct {
	Recipient, Key string
	// RequestHash is the hash of the request without the key, as
	// WatchCreateParams.RequestHash.
	RequestHash string
	// Since: ledger entries older than this are ignored.
	Since time.Time
}

// WatchCreateResult is what Store.WatchCreateMany says of one item: the
// watch as WatchCreate would return it, or the error it would return.
type WatchCreateResult struct {
	Watch *Watch
	Err   error
}

// WatchListParams filters Store.WatchList. Empty fields do not filter.
type WatchListParams struct {
	Recipient string
	// Recipients restricts to a set (a scoped token); empty means all.
	Recipients []string
	State      State
	Kind       Kind
	// Labels must all match.
	Labels map[string]string
	// Text, when set, keeps the watches whose note or predicate holds it,
	// ignoring case (ASCII letters; other characters match exactly).
	Text string
	// After is the cursor of the previous page.
	After string
	// Limit is the page size (default 100, max 1000).
	Limit int
}

// WatchCount is how many watches are in one state, of one kind.
type WatchCount struct {
	State State
	Kind  Kind
	N     int
}

// WatchPage is one page of watches; Next is the cursor of the next page, or "".
type WatchPage struct {
	Watches []*Watch `json:"watches"`
	Next    string   `json:"next,omitempty"`
}

// ScheduleEntry is the little the scheduler keeps about a pending watch.
type ScheduleEntry struct {
	ID        string
	Kind      Kind
	Every     time.Duration
	Deadline  time.Time
	StartAt   time.Time
	CreatedAt time.Time
	Polls     int
	Standing  bool
	// Errors and ConsecutiveErrors are the watch's error counts as stored
	// (see Watch.Errors): max_errors counts on across a restart.
	Errors, ConsecutiveErrors int
	// Unreadable says why a column of the row could not be read (see
	// Watch.Unreadable); the fields it would fill are zero.
	Unreadable string
}

// WatchObserveParams are the arguments of Store.WatchObserve.
type WatchObserveParams struct {
	ID          string
	Observation *Observation
	Polls       int
	// Errors, ConsecutiveErrors and CheckedAt are the watch's counts and
	// the time of this probe (see Watch); a zero CheckedAt keeps the
	// stored one.
	Errors, ConsecutiveErrors int
	CheckedAt                 time.Time
	// Message, when set, is appended in the same transaction: a standing
	// watch's change is recorded with its new baseline, so a crash can
	// neither lose nor repeat it. The store sets its Seq.
	Message *Message
	// Baseline is, with Message or CheckBaseline, the observation this
	// write follows: the watch's last observation as the caller read it
	// (nil: it had none). The write is made only if the stored last
	// observation is still that one (Observation.IsBaseline); otherwise
	// nothing is written and the error is ErrBaselineMoved. Another probe
	// wrote between this one's read and its write (a replica that held the
	// watch's shard meanwhile), and the same change is not reported twice.
	Baseline *Observation
	// CheckBaseline checks Baseline for a write without a Message: a run
	// watch's start, recorded before its program starts.
	CheckBaseline bool
}

// ErrBaselineMoved is the error of a write checked against its baseline
// (WatchObserveParams.Baseline) that is no longer the stored one: another
// probe wrote first (a standing watch's change, a run's start), and the
// next probe reads what it wrote.
var ErrBaselineMoved = &Error{Code: CodeConflict, Message: "the watch's baseline changed while it was probed: another probe recorded the change"}

// WatchSettleParams settles one watch.
type WatchSettleParams struct {
	ID        string
	State     State
	Outcome   *Outcome
	SettledAt time.Time
	Polls     int
	// Errors, ConsecutiveErrors and CheckedAt are recorded as for
	// WatchObserve; a zero CheckedAt keeps the stored one.
	Errors, ConsecutiveErrors int
	CheckedAt                 time.Time
	// AnsweredAtCreation: the registration that waited for the first
	// observation holds the answer, so nothing is mailed, unless another
	// registration joined the watch (WatchJoin): then Message is written
	// all the same and the watch is not recorded answered at creation.
	AnsweredAtCreation bool
	// Answered: the outcome comes from outside any probe (a token watch's
	// completion), so any daemon of a shared store may settle it, as any
	// may cancel: a store that fences settlements on the holder of the
	// watch's shard (PostgreSQL replicas) does not fence this one (the
	// compare-and-set on pending still settles it once), and tells the
	// holder, which delivers it.
	Answered bool
	// Message is the outcome message; nil settles silently. The store sets
	// its Seq when it writes it: when the settlement wins, and, answered
	// at creation, only when the watch was joined (Seq stays 0 when it is
	// not written).
	Message *Message
}

// WatchCancelParams cancels one watch.
type WatchCancelParams struct {
	ID string
	// Recipients, when set, restricts which watches the caller may cancel.
	Recipients []string
	Outcome    *Outcome
	SettledAt  time.Time
	// Message is the neutral line; nil cancels silently.
	Message *Message
	// CheckedAt, when set, is when the watch was last probed, and Polls,
	// Errors and ConsecutiveErrors are its live counts: the cancellation
	// records them, so the watch shows what its probes did. A zero
	// CheckedAt keeps what is stored.
	CheckedAt                        time.Time
	Polls, Errors, ConsecutiveErrors int
}

// WatchDeliverSetParams are the arguments of Store.WatchDeliverSet.
type WatchDeliverSetParams struct {
	ID string
	// Deliver is the new canonical delivery options; empty means none.
	Deliver json.RawMessage
}

// RecipientCloseParams closes a recipient.
type RecipientCloseParams struct {
	Recipient string
	Outcome   *Outcome
	SettledAt time.Time
}

// MessagesReadParams reads a mailbox.
type MessagesReadParams struct {
	Recipient string
	// Reader names the cursor; "" reads without one (After or from the start).
	Reader string
	// After, when non-nil, overrides the reader's cursor.
	After *int64
	// AllRecipients reads every recipient's messages in one seq order,
	// after After (or from the start): to resume the admin's event
	// stream. Recipient and Reader are then ignored.
	AllRecipients bool
	// Limit bounds the page (default 100, max 1000).
	Limit int
}

// MaxWatchMessages bounds Store.MessagesOfWatch: the newest this many
// messages of a watch.
const MaxWatchMessages = 100

// MessagesPage is what MessagesRead returns. Cursor is the reader's stored
// cursor before this read.
type MessagesPage struct {
	Messages []*Message `json:"messages"`
	Cursor   int64      `json:"cursor"`
}

// MessagesAckParams moves a reader's cursor.
type MessagesAckParams struct {
	Recipient string
	Reader    string
	Seq       int64
}

// PruneParams are the cut-offs of Store.Prune: rows older than these go.
type PruneParams struct {
	WatchesBefore     time.Time
	MessagesBefore    time.Time
	IdempotencyBefore time.Time
}

// PruneResult says what Prune removed and when the oldest remaining
// prunable row becomes prunable, as the creation or settlement time of that
// row (zero when nothing remains).
type PruneResult struct {
	Watches, Messages, Keys int
	// OldestSettled, OldestMessage and OldestKey are the times of the oldest
	// rows kept; zero when there are none.
	OldestSettled, OldestMessage, OldestKey time.Time
}

// TextMatchesWatch reports whether text is in a watch's note or its
// stored predicate, ignoring the case of ASCII letters: the meaning of
// WatchListParams.Text in every store. The predicate is compared with
// PredicateText(text), the spelling the text has inside it.
func TextMatchesWatch(text, note string, predicate []byte) bool {
	return TextMatches(text, note) || TextMatches(PredicateText(text), string(predicate))
}

// predicateEscaper spells what encoding/json escapes in a string (and so
// in every canonical predicate, which it writes) as it escapes it.
var predicateEscaper = strings.NewReplacer("&", `\u0026`, "<", `\u003c`, ">", `\u003e`, "\u2028", `\u2028`, "\u2029", `\u2029`)

// PredicateText returns text as it is spelled inside a stored predicate:
// encoding/json writes &, < and > (and U+2028, U+2029) as \u0026, \u003c,
// \u003e, so a URL's "?a=1&b=2" is stored "?a=1\u0026b=2". A store
// matching WatchListParams.Text against the predicate's bytes compares
// them with this (ASCII-lower-cased like the text), the note with the
// text itself.
func PredicateText(text string) string { return predicateEscaper.Replace(text) }

// TextMatches reports whether text is in any of fields, ignoring the case
// of ASCII letters.
func TextMatches(text string, fields ...string) bool {
	t := asciiLower(text)
	for _, f := range fields {
		if strings.Contains(asciiLower(f), t) {
			return true
		}
	}
	return false
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}
