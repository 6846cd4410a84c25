package memstore

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// ReceiptUpsert implements vigil.Store.
func (s *Store) ReceiptUpsert(_ context.Context, p vigil.ReceiptUpsertParams) error {
	r := p.ReceiptRecord
	if r.WatchID == "" || r.Channel == "" || r.Status == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "a receipt needs a watch id, a channel and a status")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	w, ok := s.watches[r.WatchID]
	if !ok {
		return notFound()
	}
	if s.rcpt == nil {
		s.rcpt = map[string]map[string]vigil.ReceiptRecord{}
	}
	byCh := s.rcpt[r.WatchID]
	if p.Claim || p.Ends {
		old, exists := byCh[r.Channel]
		if !p.Accepts(exists, old.Status, old.Attempts) {
			return vigil.ErrClaimed
		}
	}
	if byCh == nil {
		byCh = map[string]vigil.ReceiptRecord{}
		s.rcpt[r.WatchID] = byCh
	}
	r.UpdatedAt, r.NextAt = ms(r.UpdatedAt), ms(r.NextAt)
	byCh[r.Channel] = r
	s.refreshLocked(w)
	return nil
}

// refreshLocked sets a watch's Receipts from its records, by channel.
func (s *Store) refreshLocked(w *vigil.Watch) {
	byCh := s.rcpt[w.ID]
	rs := make([]vigil.Receipt, 0, len(byCh))
	for _, r := range byCh {
		rs = append(rs, r.Receipt)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Channel < rs[j].Channel })
	w.Receipts = rs
}

// ReceiptsResume implements vigil.Store.
func (s *Store) ReceiptsResume(_ context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res vigil.ReceiptsResumeResult
	if err := s.check(); err != nil {
		return res, err
	}
	s.recordDefaultsLocked(p)
	for id, byCh := range s.rcpt {
		w, ok := s.watches[id]
		if !ok {
			delete(s.rcpt, id) // went with its watch
			continue
		}
		changed := false
		for ch, r := range byCh {
			switch r.Status {
			case vigil.ReceiptSending:
				if vigil.ResumeSending(&r, ms(p.Now)) {
					res.Retrying = append(res.Retrying, r)
				} else {
					res.Unknown = append(res.Unknown, r)
				}
				byCh[ch] = r
				changed = true
			case vigil.ReceiptRetrying:
				res.Retrying = append(res.Retrying, r)
			}
		}
		if changed {
			s.refreshLocked(w)
		}
	}
	byKey := func(rs []vigil.ReceiptRecord) func(i, j int) bool {
		return func(i, j int) bool {
			if rs[i].WatchID != rs[j].WatchID {
				return rs[i].WatchID < rs[j].WatchID
			}
			return rs[i].Channel < rs[j].Channel
		}
	}
	sort.Slice(res.Unknown, byKey(res.Unknown))
	sort.Slice(res.Retrying, byKey(res.Retrying))
	for _, m := range s.messages {
		switch m.Type {
		case vigil.MessageFired, vigil.MessageFailed, vigil.MessageExpired, vigil.MessageErrored:
		default:
			continue
		}
		w, ok := s.watches[m.WatchID]
		if !ok || w.SettledAt.IsZero() || w.SettledAt.Before(ms(p.SettledSince)) || w.AnsweredAtCreation || !s.owes(w, s.rcpt[w.ID], p) {
			continue
		}
		u := vigil.Undispatched{WatchID: w.ID, MessageID: m.ID, Default: s.defaultOwedLocked(w, p)}
		for ch := range s.rcpt[w.ID] {
			u.Receipted = append(u.Receipted, ch)
		}
		slices.Sort(u.Receipted)
		res.Undispatched = append(res.Undispatched, u)
	}
	slices.SortFunc(res.Undispatched, func(a, b vigil.Undispatched) int { return strings.Compare(a.WatchID, b.WatchID) })
	res.Undispatched = slices.Clip(res.Undispatched)
	return res, nil
}

// recipientDefault is a recipient's default as recorded: its key (a
// digest of the URL) and since when it has been configured.
type recipientDefault struct {
	key   string
	since time.Time
}

// recordDefaultsLocked records p.Defaults (see vigil.ReceiptsResumeParams):
// a new or changed default since p.Now, an unchanged one as it was, one
// gone forgotten.
func (s *Store) recordDefaultsLocked(p vigil.ReceiptsResumeParams) {
	if p.DefaultChannel == "" {
		return
	}
	if s.defaults == nil {
		s.defaults = map[string]map[string]recipientDefault{}
	}
	old := s.defaults[p.DefaultChannel]
	rec := make(map[string]recipientDefault, len(p.Defaults))
	for r, key := range p.Defaults {
		if d, ok := old[r]; ok && d.key == key {
			rec[r] = d
			continue
		}
		rec[r] = recipientDefault{key: key, since: ms(p.Now)}
	}
	s.defaults[p.DefaultChannel] = rec
}

// defaultOwedLocked reports whether w settled while its recipient's
// default was recorded.
func (s *Store) defaultOwedLocked(w *vigil.Watch, p vigil.ReceiptsResumeParams) bool {
	if p.DefaultChannel == "" {
		return false
	}
	d, ok := s.defaults[p.DefaultChannel][w.Recipient]
	return ok && !w.SettledAt.Before(d.since)
}

// owes reports whether w may owe a channel its first attempt: one its
// Deliver names among p.Channels, or its recipient's default channel if
// it settled while that default was recorded, with no receipt. A Deliver
// that is not a JSON object names nothing.
func (s *Store) owes(w *vigil.Watch, byCh map[string]vigil.ReceiptRecord, p vigil.ReceiptsResumeParams) bool {
	if s.defaultOwedLocked(w, p) {
		if _, ok := byCh[p.DefaultChannel]; !ok {
			return true
		}
	}
	if len(w.Deliver) == 0 {
		return false
	}
	var named map[string]json.RawMessage
	if json.Unmarshal(w.Deliver, &named) != nil {
		return false
	}
	for _, c := range p.Channels {
		if _, ok := named[c]; !ok {
			continue
		}
		if _, ok := byCh[c]; !ok {
			return true
		}
	}
	return false
}
