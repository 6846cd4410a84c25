package vigil

import (
	"context"
	"time"
)

// Receipt statuses (SPEC §5). A receipt is written "sending" before each
// attempt goes out, so a crash mid-send reads back as "unknown" at the next
// start; "unknown" is never resent unless the watch opted in with
// retry_unknown. See docs/delivery.md for the diagram.
const (
	// ReceiptSending: an attempt is on its way.
	ReceiptSending = "sending"
	// ReceiptRetrying: the last attempt failed before it could land (5xx,
	// connection refused); the next one is due at NextAt.
	ReceiptRetrying = "retrying"
	// ReceiptDelivered: the channel accepted it (2xx, exit status 0, SMTP
	// accepted the mail).
	ReceiptDelivered = "delivered"
	// ReceiptUndeliverable: the channel rejected it (4xx, a non-zero exit,
	// the retry ladder ran out). Neither success nor failure of the watch.
	ReceiptUndeliverable = "undeliverable"
	// ReceiptUnknown: it may or may not have landed (a timeout after the
	// request was sent, a crash mid-send).
	ReceiptUnknown = "unknown"
)

// ReceiptStore is the part of Store that records push deliveries: one
// receipt per (watch, channel). See SPEC §5. A watch's receipts come back
// with it (Watch.Receipts) from WatchGet, WatchGetMany and WatchList, and go
// with it when it is deleted or pruned.
type ReceiptStore interface {
	// ReceiptUpsert writes the receipt of (p.WatchID, p.Channel), replacing
	// the one before, and refreshes the watch's Receipts in the same
	// transaction. ErrNotFound if there is no such watch. With p.Claim it
	// writes only if the receipt there is the one the attempt follows
	// (ReceiptClaimable), and otherwise writes nothing and returns an
	// error with code conflict (ErrClaimed).
	ReceiptUpsert(ctx context.Context, p ReceiptUpsertParams) error
	// ReceiptsResume runs once at start-up, before anything is sent: it
	// records the recipients' defaults as configured now (p.Defaults),
	// turns every "sending" receipt into "unknown" (at p.Now) and returns
	// those, the "retrying" receipts, and the outcome messages of watches
	// settled since p.SettledSince that may still owe a channel a first
	// attempt: a channel their Deliver names (among p.Channels), or their
	// recipient's default channel (p.DefaultChannel) if the watch settled
	// while that default was recorded, that has no receipt (settled, but
	// the daemon stopped before that channel's job was taken, whatever
	// became of the watch's other channels). All in one transaction.
	ReceiptsResume(ctx context.Context, p ReceiptsResumeParams) (ReceiptsResumeResult, error)
}

// ReceiptRecord is a receipt as the store keeps it: the public Receipt
// plus what the dispatcher needs to resume it.
type ReceiptRecord struct {
	WatchID string
	// MessageID is the outcome message delivered: the webhook-id, stable
	// across retries.
	MessageID string
	Receipt
	// NextAt is when a retrying receipt's next attempt is due.
	NextAt time.Time
}

// ReceiptUpsertParams are the arguments of Store.ReceiptUpsert.
type ReceiptUpsertParams struct {
	ReceiptRecord
	// Claim makes the write the start of a delivery attempt (the
	// "sending" written before it goes out, or the final status written
	// instead of sending): it is made only if the channel's receipt is
	// still the one the attempt follows, which had Prior attempts (see
	// ReceiptClaimable). Two attempts that follow the same receipt (two
	// jobs of one delivery, on one daemon or on two replicas the watch's
	// shard moved between) cannot both go out.
	Claim bool
	// Prior is how many attempts the receipt a claim follows had: 0 for
	// a first attempt, which follows no receipt.
	Prior int
	// A claim's NextAt (a "sending" receipt's) is when the attempt after
	// it is due should it end unknown (retry_unknown): set, a resume that
	// finds the receipt still sending makes it retrying (ResumeSending).
	// Ends makes the write the end of the attempt that claimed the
	// receipt (the status it ended with): it is made only if the receipt
	// is still that attempt's, with as many attempts: sending, or unknown
	// or retrying (a replica that took the watch's shard over while it ran
	// resumed it, and has not started the next attempt), or already what
	// it writes (a write again after one in doubt that landed). An attempt that outlived its claim (its shard moved away and
	// came back while it ran, and the replica in between started the next
	// attempt, or ended the delivery) writes nothing over what followed.
	Ends bool
}

// Accepts reports whether p's write may be made over the channel's receipt
// as stored (exists false: none): a claim over the receipt it follows
// (ReceiptClaimable), an end over its own attempt's receipt (Ends), and
// any other write over anything. A store that finds it may not returns
// ErrClaimed and writes nothing.
func (p ReceiptUpsertParams) Accepts(exists bool, status string, attempts int) bool {
	switch {
	case p.Claim:
		return ReceiptClaimable(exists, status, attempts, p.Prior)
	case p.Ends:
		return exists && attempts == p.Attempts && (status == p.Status ||
			status == ReceiptSending || status == ReceiptUnknown || status == ReceiptRetrying)
	}
	return true
}

// ErrClaimed is the error of a claim (ReceiptUpsertParams.Claim), or of
// an attempt's end (Ends), that found the receipt moved on: another
// attempt took the delivery over, and the caller sends and writes nothing.
var ErrClaimed = &Error{Code: CodeConflict, Message: "another attempt took this delivery over"}

// ReceiptClaimable reports whether an attempt that follows prior attempts
// may start over the channel's receipt as stored (exists false: none):
// with none, only a first attempt; over one, only if it had prior
// attempts and is waiting for the next (retrying, or unknown for a
// delivery that opted into retry_unknown). A receipt sending (another
// attempt on its way) or final (delivered, undeliverable) is nobody's to
// start again.
func ReceiptClaimable(exists bool, status string, attempts, prior int) bool {
	if !exists {
		return prior == 0
	}
	return attempts == prior && (status == ReceiptRetrying || status == ReceiptUnknown)
}

// ResumeSending turns r, a receipt found sending by ReceiptsResume (its
// attempt was cut short by a crash, or by the loss of its shard), into what
// it is from now: retrying, due at its NextAt, when its attempt set one (a
// webhook that opted into retry_unknown, with a rung of its ladder left:
// see ReceiptUpsertParams), so that the next attempt is made however many
// starts it takes; else unknown. It reports whether r is retrying.
func ResumeSending(r *ReceiptRecord, now time.Time) (retrying bool) {
	r.UpdatedAt = now
	if !r.NextAt.IsZero() {
		r.Status, r.Detail = ReceiptRetrying, "the daemon stopped while this was being sent, and it may have been received: sent again, as retry_unknown asks"
		return true
	}
	r.Status, r.Detail = ReceiptUnknown, "the daemon stopped while this was being sent"
	return false
}

// ReceiptsResumeParams are the arguments of Store.ReceiptsResume.
type ReceiptsResumeParams struct {
	Now time.Time
	// SettledSince bounds the search for settled watches that still owe a
	// channel.
	SettledSince time.Time
	// Channels are the push channels by the names a Deliver uses for them
	// as its top-level keys ("webhook", "command", "email"): a settled
	// watch whose Deliver names one of them that has no receipt is
	// undispatched, whatever receipts its other channels have.
	Channels []string
	// DefaultChannel is the channel a recipient's default stands for (the
	// webhook of a recipient's default webhook, for watches naming none).
	DefaultChannel string
	// Defaults are the recipients that have a default DefaultChannel as
	// configured now, each with a key that changes when the default does
	// (a digest of its URL). ReceiptsResume records them first, durably
	// and in the same transaction: a recipient new here, or whose key
	// changed, is recorded as having its default since p.Now; one
	// recorded before and no longer here is forgotten (a default added
	// again later starts again); one unchanged keeps its time. A settled
	// watch then owes DefaultChannel only if its recipient's default was
	// recorded at or before the watch's settlement (Undispatched.Default):
	// a default applies to the outcomes that settle while it is
	// configured, never to those that settled before it was (they owed
	// it nothing), nor to other recipients' watches. Callers run it
	// before anything settles under the configuration they pass.
	Defaults map[string]string
}

// ReceiptsResumeResult is what ReceiptsResume found.
type ReceiptsResumeResult struct {
	// Unknown were "sending" and are now "unknown".
	Unknown []ReceiptRecord
	// Retrying are due again at their NextAt: those found retrying, and
	// those found sending that ResumeSending made retrying.
	Retrying []ReceiptRecord
	// Undispatched are settled watches with an outcome message that may
	// owe a channel its first attempt, by watch id.
	Undispatched []Undispatched
}

// Undispatched names a settled watch whose outcome may not have been
// handed to every push channel it asks for.
type Undispatched struct {
	WatchID   string
	MessageID string
	// Receipted are the channels that have a receipt, in order: they
	// were handed over and are not dispatched again.
	Receipted []string
	// Default: the watch settled while its recipient's default (as
	// recorded from ReceiptsResumeParams.Defaults) was configured, so it
	// owes DefaultChannel when its Deliver names none. False: its
	// recipient's default, if any now, came after it and is not owed.
	Default bool
}
