// Package memstore is an in-memory vigil.Store: the scheduler and engine
// without a database, for Go programs that embed vigil and for tests. It
// keeps nothing across restarts and passes the same conformance suite as
// the durable stores.
package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
	"github.com/vigil-run/vigil/internal/storecheck"
)

// Store is an in-memory vigil.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	watches  map[string]*vigil.Watch
	pending  map[string]string // identity -> id
	active   map[string]int    // recipient -> pending count
	messages []*vigil.Message
	seq      int64
	outcome  map[string]bool // watch id -> has an outcome message
	joined   map[string]bool // pending watch id -> a registration joined it (WatchJoin)
	readers  map[[2]string]int64
	ledger   map[[2]string]ledgerEntry
	closed   bool
	tok      tokens
	// rcpt holds push receipts: watch id -> channel -> receipt (receipt.go).
	rcpt map[string]map[string]vigil.ReceiptRecord
	// defaults are the recipients' defaults recorded by ReceiptsResume:
	// channel -> recipient -> key and since (receipt.go).
	defaults map[string]map[string]recipientDefault
}

type ledgerEntry struct {
	hash     string
	watchID  string
	existing bool
	at       time.Time
}

var _ vigil.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		watches: map[string]*vigil.Watch{}, pending: map[string]string{}, active: map[string]int{},
		outcome: map[string]bool{}, readers: map[[2]string]int64{}, ledger: map[[2]string]ledgerEntry{},
	}
}

// ms is what a database keeps of a time: UTC milliseconds.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

func msObs(o *vigil.Observation) *vigil.Observation {
	if o != nil {
		o.At = ms(o.At)
	}
	return o
}

func clone(w *vigil.Watch) *vigil.Watch {
	c := *w
	c.Predicate = slices.Clone(w.Predicate)
	c.Deliver = slices.Clone(w.Deliver)
	c.Labels = maps.Clone(w.Labels)
	c.Receipts = slices.Clone(w.Receipts)
	c.LastObservation = cloneObs(w.LastObservation)
	if w.Outcome != nil {
		o := *w.Outcome
		o.Observation = cloneObs(o.Observation)
		c.Outcome = &o
	}
	c.Existing, c.Replayed, c.NextDue = false, false, time.Time{}
	return &c
}

// cloneObs copies an observation through JSON, as a database would (its
// facts' numbers come back json.Number, as the SQL stores read them).
func cloneObs(o *vigil.Observation) *vigil.Observation {
	if o == nil {
		return nil
	}
	b, _ := json.Marshal(o)
	if c, err := settlement.DecodeObservation(b); err == nil {
		return c
	}
	return &vigil.Observation{}
}

func (s *Store) check() error {
	if s.closed {
		return vigil.Errorf(vigil.CodeInternal, "store is closed")
	}
	return nil
}

func notFound() error { return &vigil.Error{Code: vigil.CodeNotFound, Message: "watch not found"} }

// WatchCreate implements vigil.Store.
func (s *Store) WatchCreate(_ context.Context, p vigil.WatchCreateParams) (*vigil.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.create(p)
}

// WatchCreateMany implements vigil.Store: every item under one lock, as
// one transaction.
func (s *Store) WatchCreateMany(_ context.Context, ps []vigil.WatchCreateParams) ([]vigil.WatchCreateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]vigil.WatchCreateResult, len(ps))
	for i, p := range ps {
		out[i].Watch, out[i].Err = s.create(p)
	}
	return out, nil
}

// create is WatchCreate with s.mu held.
func (s *Store) create(p vigil.WatchCreateParams) (*vigil.Watch, error) {
	w := p.Watch
	if err := storecheck.NewWatch(w, p.IdempotencyKey, p.RequestHash); err != nil {
		return nil, err
	}
	key := [2]string{w.Recipient, p.IdempotencyKey}
	if p.IdempotencyKey != "" {
		if le, ok := s.ledger[key]; ok && !le.at.Before(ms(p.IdempotencySince)) {
			// An entry whose watch is gone went with it: no entry.
			if got, ok := s.watches[le.watchID]; ok {
				if le.hash != p.RequestHash {
					return nil, &vigil.Error{Code: vigil.CodeIdempotencyConflict, Field: "idempotency_key",
						Message: fmt.Sprintf("idempotency key %q was used with a different request", p.IdempotencyKey)}
				}
				c := clone(got)
				c.Replayed, c.Existing = true, le.existing
				return c, nil
			}
		}
	}
	if id, ok := s.pending[w.Identity]; ok {
		if p.IdempotencyKey != "" {
			s.ledger[key] = ledgerEntry{p.RequestHash, id, true, ms(w.CreatedAt)}
		}
		c := clone(s.watches[id])
		c.Existing = true
		return c, nil
	}
	if p.MaxActive > 0 && len(s.pending) >= p.MaxActive {
		return nil, vigil.Errorf(vigil.CodeQuotaExceeded, "the daemon already holds %d pending watches (max_active)", p.MaxActive)
	}
	if p.MaxActivePerRecipient > 0 && s.active[w.Recipient] >= p.MaxActivePerRecipient {
		return nil, vigil.Errorf(vigil.CodeQuotaExceeded, "recipient %q already has %d pending watches (max_active_per_recipient)", w.Recipient, p.MaxActivePerRecipient)
	}
	if _, dup := s.watches[w.ID]; dup {
		return nil, vigil.Errorf(vigil.CodeConflict, "watch %q already exists", w.ID)
	}
	c := clone(w)
	if c.State == "" {
		c.State = vigil.StatePending
	}
	c.CreatedAt, c.Deadline, c.StartAt = ms(c.CreatedAt), ms(c.Deadline), ms(c.StartAt)
	c.LastObservation = msObs(c.LastObservation)
	s.watches[w.ID] = c
	s.pending[w.Identity] = w.ID
	s.active[w.Recipient]++
	if p.IdempotencyKey != "" {
		s.ledger[key] = ledgerEntry{p.RequestHash, w.ID, false, ms(w.CreatedAt)}
	}
	return clone(c), nil
}

// IdempotencyReplay implements vigil.Store.
func (s *Store) IdempotencyReplay(_ context.Context, p vigil.IdempotencyReplayParams) (*vigil.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	le, ok := s.ledger[[2]string{p.Recipient, p.Key}]
	if !ok || le.at.Before(ms(p.Since)) || le.hash != p.RequestHash {
		return nil, nil
	}
	w, ok := s.watches[le.watchID]
	if !ok {
		return nil, nil
	}
	c := clone(w)
	c.Replayed, c.Existing = true, le.existing
	return c, nil
}

// WatchGet implements vigil.Store.
func (s *Store) WatchGet(_ context.Context, id string) (*vigil.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	w, ok := s.watches[id]
	if !ok {
		return nil, notFound()
	}
	return clone(w), nil
}

// WatchGetMany implements vigil.Store.
func (s *Store) WatchGetMany(_ context.Context, ids []string) ([]*vigil.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]*vigil.Watch, 0, len(ids))
	for _, id := range ids {
		if w, ok := s.watches[id]; ok {
			out = append(out, clone(w))
		}
	}
	return out, nil
}

// WatchList implements vigil.Store.
func (s *Store) WatchList(_ context.Context, p vigil.WatchListParams) (vigil.WatchPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return vigil.WatchPage{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	if p.After != "" && !validCursor(p.After) {
		return vigil.WatchPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "after %q is not a cursor this store made", p.After)
	}
	// Newest first by (created ms, id), the order of cursorOf's strings,
	// compared without formatting them: a page is a scan, not n log n
	// Sprintfs.
	afterMS, afterID := cursorKey(p.After)
	all := make([]*vigil.Watch, 0, len(s.watches))
	for _, w := range s.watches {
		if p.Recipient != "" && w.Recipient != p.Recipient ||
			len(p.Recipients) > 0 && !slices.Contains(p.Recipients, w.Recipient) ||
			p.State != "" && w.State != p.State || p.Kind != "" && w.Kind != p.Kind {
			continue
		}
		if p.After != "" && compareKey(w.CreatedAt.UnixMilli(), w.ID, afterMS, afterID) >= 0 {
			continue
		}
		match := p.Text == "" || vigil.TextMatchesWatch(p.Text, w.Note, w.Predicate)
		for k, v := range p.Labels {
			if w.Labels[k] != v {
				match = false
			}
		}
		if match {
			all = append(all, w)
		}
	}
	slices.SortFunc(all, func(a, b *vigil.Watch) int {
		return compareKey(b.CreatedAt.UnixMilli(), b.ID, a.CreatedAt.UnixMilli(), a.ID)
	})
	var page vigil.WatchPage
	page.Watches = make([]*vigil.Watch, 0, min(limit, len(all)))
	for _, w := range all {
		if len(page.Watches) == limit {
			page.Next = cursorOf(page.Watches[limit-1])
			break
		}
		page.Watches = append(page.Watches, clone(w))
	}
	return page, nil
}

// WatchCounts implements vigil.Store.
func (s *Store) WatchCounts(_ context.Context, recipients []string) ([]vigil.WatchCount, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	type key struct {
		st vigil.State
		k  vigil.Kind
	}
	n := map[key]int{}
	for _, w := range s.watches {
		if len(recipients) == 0 || slices.Contains(recipients, w.Recipient) {
			n[key{w.State, w.Kind}]++
		}
	}
	out := make([]vigil.WatchCount, 0, len(n))
	for k, c := range n {
		out = append(out, vigil.WatchCount{State: k.st, Kind: k.k, N: c})
	}
	return out, nil
}

func validCursor(c string) bool {
	ts, id, ok := strings.Cut(c, ".")
	_, err := strconv.ParseUint(ts, 10, 64)
	return ok && len(ts) == 20 && err == nil && id != ""
}

// cursorKey reads a cursor made by cursorOf (validCursor holds); zeros
// for none.
func cursorKey(c string) (int64, string) {
	ts, id, _ := strings.Cut(c, ".")
	ms, _ := strconv.ParseInt(ts, 10, 64)
	return ms, id
}

// compareKey orders (ms, id) pairs as their cursors' strings order.
func compareKey(ams int64, aid string, bms int64, bid string) int {
	if c := cmp.Compare(ams, bms); c != 0 {
		return c
	}
	return strings.Compare(aid, bid)
}

func cursorOf(w *vigil.Watch) string {
	return fmt.Sprintf("%020d.%s", w.CreatedAt.UnixMilli(), w.ID)
}

// WatchListPending implements vigil.Store.
func (s *Store) WatchListPending(_ context.Context) ([]vigil.ScheduleEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]vigil.ScheduleEntry, 0, len(s.pending))
	for _, id := range s.pending {
		w := s.watches[id]
		out = append(out, vigil.ScheduleEntry{ID: w.ID, Kind: w.Kind, Every: w.Every, Deadline: w.Deadline,
			StartAt: w.StartAt, CreatedAt: w.CreatedAt, Polls: w.Polls, Standing: w.Standing,
			Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors})
	}
	return out, nil
}

// WatchObserve implements vigil.Store.
func (s *Store) WatchObserve(_ context.Context, p vigil.WatchObserveParams) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return false, err
	}
	w, ok := s.watches[p.ID]
	if !ok || w.State != vigil.StatePending {
		return false, nil
	}
	if (p.Message != nil || p.CheckBaseline) && !w.LastObservation.IsBaseline(p.Baseline) {
		return false, vigil.ErrBaselineMoved
	}
	w.LastObservation = msObs(cloneObs(p.Observation))
	w.Polls = p.Polls
	setCounts(w, p.Errors, p.ConsecutiveErrors, p.CheckedAt)
	if p.Message != nil {
		s.appendLocked(p.Message)
	}
	return true, nil
}

func (s *Store) settleLocked(w *vigil.Watch, state vigil.State, out *vigil.Outcome, at time.Time) {
	delete(s.pending, w.Identity)
	delete(s.joined, w.ID)
	s.active[w.Recipient]--
	w.State = state
	w.SettledAt = ms(at)
	if out != nil {
		c := *out
		c.Observation = msObs(cloneObs(out.Observation))
		w.Outcome = &c
	}
}

// setCounts records a watch's error counts and, when set, the time of its
// latest probe.
func setCounts(w *vigil.Watch, errs, consecutive int, checked time.Time) {
	w.Errors, w.ConsecutiveErrors = errs, consecutive
	if !checked.IsZero() {
		w.CheckedAt = ms(checked)
	}
}

func (s *Store) appendLocked(m *vigil.Message) *vigil.Message {
	s.seq++
	m.Seq = s.seq
	c := *m
	c.Data = slices.Clone(m.Data)
	c.CreatedAt = ms(m.CreatedAt)
	s.messages = append(s.messages, &c)
	if isOutcome(c.Type) {
		s.outcome[c.WatchID] = true
	}
	out := c
	return &out
}

func isOutcome(t vigil.MessageType) bool {
	switch t {
	case vigil.MessageFired, vigil.MessageFailed, vigil.MessageExpired, vigil.MessageErrored, vigil.MessageCancelled:
		return true
	}
	return false
}

// WatchSettle implements vigil.Store. A message's WatchID, Recipient,
// Type and CreatedAt default to the watch's id and recipient, the outcome
// type and SettledAt (settlement.Prepare), as in the SQL stores.
func (s *Store) WatchSettle(_ context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	enc, err := settlement.Prepare("memstore", ps)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	for i, p := range ps {
		// An outcome message that cannot be written fails the whole batch,
		// before anything is changed, as a transaction would roll back.
		// Answered at creation and not joined, the message is not written.
		writes := enc[i].Message != nil && (!p.AnsweredAtCreation || s.joined[p.ID])
		if w, ok := s.watches[p.ID]; ok && w.State == vigil.StatePending && writes && s.outcome[p.ID] {
			return nil, vigil.Errorf(vigil.CodeConflict, "watch %q already has its outcome message", p.ID)
		}
	}
	won := make([]bool, len(ps))
	for i, p := range ps {
		w, ok := s.watches[p.ID]
		if !ok || w.State != vigil.StatePending {
			continue
		}
		joined := s.joined[p.ID]
		s.settleLocked(w, p.State, p.Outcome, p.SettledAt)
		w.Polls = p.Polls
		setCounts(w, p.Errors, p.ConsecutiveErrors, p.CheckedAt)
		// Answered at creation, a message is written only for a watch a
		// registration joined, which then is not answered at creation.
		m := enc[i].Message
		if p.AnsweredAtCreation && !joined {
			m = nil
		}
		w.AnsweredAtCreation = p.AnsweredAtCreation && !joined
		if p.Outcome != nil && p.Outcome.Observation != nil {
			w.LastObservation = msObs(cloneObs(p.Outcome.Observation))
		}
		if m != nil {
			m.Recipient = cmp.Or(m.Recipient, w.Recipient)
			p.Message.Seq = s.appendLocked(m).Seq
		}
		won[i] = true
	}
	return won, nil
}

// WatchJoin implements vigil.Store.
func (s *Store) WatchJoin(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return false, err
	}
	w, ok := s.watches[id]
	if !ok || w.State != vigil.StatePending {
		return false, nil
	}
	if s.joined == nil {
		s.joined = map[string]bool{}
	}
	s.joined[id] = true
	return true, nil
}

// WatchDeliverSet implements vigil.Store.
func (s *Store) WatchDeliverSet(_ context.Context, p vigil.WatchDeliverSetParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	w, ok := s.watches[p.ID]
	if !ok {
		return notFound()
	}
	w.Deliver = nil
	if len(p.Deliver) > 0 {
		w.Deliver = slices.Clone(p.Deliver)
	}
	return nil
}

// WatchCancel implements vigil.Store. Its message's defaults are as
// WatchSettle's (settlement.Cancel).
func (s *Store) WatchCancel(_ context.Context, p vigil.WatchCancelParams) (*vigil.Watch, bool, error) {
	prep, err := settlement.Cancel("memstore", p)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, false, err
	}
	w, ok := s.watches[p.ID]
	if !ok || len(p.Recipients) > 0 && !slices.Contains(p.Recipients, w.Recipient) {
		return nil, false, notFound()
	}
	if w.State != vigil.StatePending {
		return clone(w), false, nil
	}
	// A message that cannot be written fails the cancel, as in WatchSettle.
	if prep.Message != nil && s.outcome[p.ID] {
		return nil, false, vigil.Errorf(vigil.CodeConflict, "watch %q already has its outcome message", p.ID)
	}
	s.settleLocked(w, vigil.StateCancelled, p.Outcome, p.SettledAt)
	if !p.CheckedAt.IsZero() {
		w.Polls = p.Polls
		setCounts(w, p.Errors, p.ConsecutiveErrors, p.CheckedAt)
	}
	if m := prep.Message; m != nil {
		m.Recipient = cmp.Or(m.Recipient, w.Recipient)
		p.Message.Seq = s.appendLocked(m).Seq
	}
	return clone(w), true, nil
}

// WatchDelete implements vigil.Store.
func (s *Store) WatchDelete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	w, ok := s.watches[id]
	if !ok {
		return notFound()
	}
	if w.State == vigil.StatePending {
		return vigil.Errorf(vigil.CodeConflict, "watch %q is still pending: cancel it first", id)
	}
	delete(s.watches, id)
	// Its idempotency entries go with it (the SQL stores' ON DELETE
	// CASCADE), as they do when it is pruned.
	maps.DeleteFunc(s.ledger, func(_ [2]string, le ledgerEntry) bool { return le.watchID == id })
	return nil
}

// RecipientClose implements vigil.Store.
func (s *Store) RecipientClose(_ context.Context, p vigil.RecipientCloseParams) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range s.pending {
		if w := s.watches[id]; w.Recipient == p.Recipient {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.settleLocked(s.watches[id], vigil.StateCancelled, p.Outcome, p.SettledAt)
	}
	return ids, nil
}

// MessageCreate implements vigil.Store.
func (s *Store) MessageCreate(_ context.Context, m *vigil.Message) (*vigil.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := storecheck.Message(m); err != nil {
		return nil, err
	}
	if isOutcome(m.Type) && s.outcome[m.WatchID] {
		return nil, vigil.Errorf(vigil.CodeConflict, "watch %q already has its outcome message", m.WatchID)
	}
	return s.appendLocked(m), nil
}

// MessagesRead implements vigil.Store.
func (s *Store) MessagesRead(_ context.Context, p vigil.MessagesReadParams) (vigil.MessagesPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return vigil.MessagesPage{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var cursor int64
	if p.Reader != "" && !p.AllRecipients {
		cursor = s.readers[[2]string{p.Recipient, p.Reader}]
	}
	after := cursor
	if p.After != nil {
		after = *p.After
	}
	page := vigil.MessagesPage{Messages: []*vigil.Message{}, Cursor: cursor}
	i := sort.Search(len(s.messages), func(i int) bool { return s.messages[i].Seq > after })
	for ; i < len(s.messages) && len(page.Messages) < limit; i++ {
		if m := s.messages[i]; p.AllRecipients || m.Recipient == p.Recipient {
			c := *m
			page.Messages = append(page.Messages, &c)
		}
	}
	return page, nil
}

// MessagesOfWatch implements vigil.Store.
func (s *Store) MessagesOfWatch(_ context.Context, watchID string, limit int) ([]*vigil.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > vigil.MaxWatchMessages {
		limit = vigil.MaxWatchMessages
	}
	out := []*vigil.Message{}
	for i := len(s.messages) - 1; i >= 0 && len(out) < limit; i-- {
		if m := s.messages[i]; m.WatchID == watchID && watchID != "" {
			c := *m
			out = append(out, &c)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// MessagesLastSeq implements vigil.Store.
func (s *Store) MessagesLastSeq(_ context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	if len(s.messages) == 0 {
		return 0, nil
	}
	return s.messages[len(s.messages)-1].Seq, nil
}

// MessagesAck implements vigil.Store.
func (s *Store) MessagesAck(_ context.Context, p vigil.MessagesAckParams) error {
	if p.Recipient == "" || p.Reader == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "an ack needs a recipient and a reader")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	k := [2]string{p.Recipient, p.Reader}
	s.readers[k] = max(s.readers[k], p.Seq)
	return nil
}

// Prune implements vigil.Store. Its cut-offs are compared in whole
// milliseconds, the times the store keeps, as the SQL stores compare them.
func (s *Store) Prune(_ context.Context, p vigil.PruneParams) (vigil.PruneResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return vigil.PruneResult{}, err
	}
	var r vigil.PruneResult
	for id, w := range s.watches {
		if w.State == vigil.StatePending {
			continue
		}
		if w.SettledAt.Before(ms(p.WatchesBefore)) {
			delete(s.watches, id)
			r.Watches++
			continue
		}
		r.OldestSettled = oldest(r.OldestSettled, w.SettledAt)
	}
	kept := s.messages[:0]
	for _, m := range s.messages {
		if m.CreatedAt.Before(ms(p.MessagesBefore)) {
			r.Messages++
			continue
		}
		r.OldestMessage = oldest(r.OldestMessage, m.CreatedAt)
		kept = append(kept, m)
	}
	s.messages = kept
	for k, le := range s.ledger {
		if _, ok := s.watches[le.watchID]; !ok {
			delete(s.ledger, k) // went with its watch
			continue
		}
		if le.at.Before(ms(p.IdempotencyBefore)) {
			delete(s.ledger, k)
			r.Keys++
			continue
		}
		r.OldestKey = oldest(r.OldestKey, le.at)
	}
	return r, nil
}

func oldest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// Close implements vigil.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// String describes the store for start-up logs.
func (s *Store) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "memory (" + strconv.Itoa(len(s.watches)) + " watches)"
}
