package sqlite

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// interpretError translates a driver error into vigil's error model: no
// rows is not_found, a unique violation is conflict; anything else is
// returned as it is (an internal error). A full disk, which SQLite may find
// in an op or only at its batch's commit, is translated once for every
// write by the writer (storageFull).
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return &vigil.Error{Code: vigil.CodeNotFound, Message: "not found", Err: err}
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return &vigil.Error{Code: vigil.CodeConflict, Message: "conflict: the row already exists", Err: err}
		}
	}
	return err
}

// storageFull returns err as storage_full when it says the disk is full,
// and as it is otherwise.
func storageFull(err error) error {
	var ve *vigil.Error
	if err == nil || errors.As(err, &ve) || !isFull(err) {
		return err
	}
	return &vigil.Error{Code: vigil.CodeStorageFull, Message: vigil.ErrStorageFull.Message, Err: err}
}

// isFull reports whether err says the disk (or the owner's quota) is full:
// SQLite's SQLITE_FULL, which its unix VFS answers for ENOSPC, or the
// system's own error from a file written outside SQLite.
func isFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// corrupted reports whether err is SQLite finding the database damaged or
// not a database at all.
func corrupted(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// wrap gives an internal error its context; a *vigil.Error made by
// interpretError or by the store's own rules goes back as it is, so its
// message stays the sentence a user reads.
func wrap(what string, err error) error {
	err = interpretError(err)
	var ve *vigil.Error
	if errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

func notFound(id string) error {
	return vigil.Errorf(vigil.CodeNotFound, "watch %s not found", id)
}

// identityArg encodes an identity. vigil.Identity is 32 lowercase hex
// digits: that is stored as the 16 bytes it spells, a BLOB, which halves it
// in the row and in the unique index. Any other string is stored as TEXT; a
// BLOB never equals a TEXT, so the encoding keeps distinct identities
// distinct.
func identityArg(s string) any {
	if len(s) != 32 {
		return s
	}
	b, err := hex.DecodeString(s)
	if err != nil || hex.EncodeToString(b) != s {
		return s
	}
	return b
}

// identityString decodes identityArg.
func identityString(v any) string {
	switch v := v.(type) {
	case []byte:
		return hex.EncodeToString(v)
	case string:
		return v
	}
	return ""
}

// ms encodes a time as unix milliseconds; the zero time is NULL.
func ms(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// msTime decodes ms.
func msTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// truncTime is t as it comes back from the store: UTC, milliseconds.
func truncTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// sinceMS encodes a lower bound: the zero time bounds nothing.
func sinceMS(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixMilli()
}

// durMS encodes a duration as milliseconds; zero is NULL.
func durMS(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.Milliseconds()
}

func msDur(v sql.NullInt64) time.Duration {
	return time.Duration(v.Int64) * time.Millisecond
}

// nullInt encodes zero as NULL, to keep rows small.
func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rawText binds raw JSON as TEXT (a []byte would bind as a BLOB); empty is NULL.
func rawText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// jsonText marshals v as TEXT.
func jsonText(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// encodedWatch is a watch as it is stored, with the JSON columns encoded.
type encodedWatch struct {
	labels, receipts, lastObs, outcome any
}

func encodeWatch(w *vigil.Watch) (encodedWatch, error) {
	var e encodedWatch
	var err error
	if len(w.Labels) > 0 {
		if e.labels, err = jsonText(w.Labels); err != nil {
			return e, fmt.Errorf("labels: %w", err)
		}
	}
	if len(w.Receipts) > 0 {
		if e.receipts, err = jsonText(w.Receipts); err != nil {
			return e, fmt.Errorf("receipts: %w", err)
		}
	}
	if w.LastObservation != nil {
		if e.lastObs, err = jsonText(w.LastObservation); err != nil {
			return e, fmt.Errorf("last observation: %w", err)
		}
	}
	if w.Outcome != nil {
		if e.outcome, err = jsonText(w.Outcome); err != nil {
			return e, fmt.Errorf("outcome: %w", err)
		}
	}
	return e, nil
}

// args returns the values of watchColumns for an insert.
func (e encodedWatch) args(w *vigil.Watch) []any {
	return []any{
		w.ID, w.Recipient, string(w.Kind), string(w.State), identityArg(w.Identity), w.CreatedAt.UnixMilli(),
		rawText(w.Predicate), nullStr(string(w.Mode)), durMS(w.Every),
		ms(w.Deadline), ms(w.StartAt), ms(w.SettledAt), w.Polls, b2i(w.Standing),
		nullStr(w.Note), e.labels, rawText(w.Deliver), nullInt(w.Stable), durMS(w.StableFor),
		nullInt(w.MaxPolls), nullInt(w.MaxErrors), nullInt(w.ChainDepth), nullStr(w.TokenID),
		b2i(w.AnsweredAtCreation), e.lastObs, e.outcome, e.receipts,
	}
}

// stored returns w as WatchGet will return it once e is written: times in
// UTC at milliseconds, durations at milliseconds, empty values nil, JSON
// values as they decode, and none of the per-call flags.
func (e encodedWatch) stored(w *vigil.Watch) (*vigil.Watch, error) {
	c := *w
	c.CreatedAt, c.Deadline, c.StartAt, c.SettledAt = truncTime(c.CreatedAt), truncTime(c.Deadline), truncTime(c.StartAt), truncTime(c.SettledAt)
	c.NextDue = time.Time{}
	c.Every, c.StableFor = c.Every.Truncate(time.Millisecond), c.StableFor.Truncate(time.Millisecond)
	c.Existing, c.Replayed = false, false
	if len(c.Predicate) == 0 {
		c.Predicate = nil
	}
	if len(c.Deliver) == 0 {
		c.Deliver = nil
	}
	c.Labels, c.Receipts, c.LastObservation, c.Outcome = nil, nil, nil, nil
	if err := decodeJSON(e.labels, &c.Labels); err != nil {
		return nil, err
	}
	if err := decodeJSON(e.receipts, &c.Receipts); err != nil {
		return nil, err
	}
	if err := decodeJSON(e.lastObs, &c.LastObservation); err != nil {
		return nil, err
	}
	if err := decodeJSON(e.outcome, &c.Outcome); err != nil {
		return nil, err
	}
	return &c, nil
}

func decodeJSON(v any, dst any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	return json.Unmarshal([]byte(s), dst)
}

type scanner interface {
	Scan(dest ...any) error
}

// scanWatch reads watchColumns.
func scanWatch(sc scanner) (*vigil.Watch, error) {
	var (
		w                                                 vigil.Watch
		kind, state                                       string
		mode, note, token                                 sql.NullString
		pred, labels, deliver, lastObs, outcome, receipts []byte
		created                                           int64
		every, deadline, startAt, settledAt, stableFor    sql.NullInt64
		stable, maxPolls, maxErrors, chain                sql.NullInt64
		standing, answered                                bool
		identity                                          any
	)
	err := sc.Scan(&w.ID, &w.Recipient, &kind, &state, &identity, &created, &pred, &mode, &every,
		&deadline, &startAt, &settledAt, &w.Polls, &standing, &note, &labels, &deliver, &stable, &stableFor,
		&maxPolls, &maxErrors, &chain, &token, &answered, &lastObs, &outcome, &receipts)
	if err != nil {
		return nil, err
	}
	w.Kind, w.State, w.Mode = vigil.Kind(kind), vigil.State(state), vigil.Mode(mode.String)
	w.Identity = identityString(identity)
	w.CreatedAt = time.UnixMilli(created).UTC()
	w.Deadline, w.StartAt, w.SettledAt = msTime(deadline), msTime(startAt), msTime(settledAt)
	w.Every, w.StableFor = msDur(every), msDur(stableFor)
	w.Standing, w.AnsweredAtCreation = standing, answered
	w.Note, w.TokenID = note.String, token.String
	w.Stable, w.MaxPolls, w.MaxErrors, w.ChainDepth = int(stable.Int64), int(maxPolls.Int64), int(maxErrors.Int64), int(chain.Int64)
	if pred != nil {
		w.Predicate = pred
	}
	if deliver != nil {
		w.Deliver = deliver
	}
	for _, f := range []struct {
		src  []byte
		dst  any
		name string
	}{
		{labels, &w.Labels, "labels"},
		{receipts, &w.Receipts, "receipts"},
		{lastObs, &w.LastObservation, "last_observation"},
		{outcome, &w.Outcome, "outcome"},
	} {
		if f.src == nil {
			continue
		}
		if err := json.Unmarshal(f.src, f.dst); err != nil {
			return nil, fmt.Errorf("watch %s: decode %s: %w", w.ID, f.name, err)
		}
	}
	return &w, nil
}

func scanMessage(sc scanner) (*vigil.Message, error) {
	var (
		m       vigil.Message
		watchID sql.NullString
		typ     string
		data    []byte
		created int64
	)
	if err := sc.Scan(&m.Seq, &m.ID, &m.Recipient, &watchID, &typ, &m.Text, &data, &created); err != nil {
		return nil, err
	}
	m.WatchID, m.Type, m.CreatedAt = watchID.String, vigil.MessageType(typ), time.UnixMilli(created).UTC()
	if data != nil {
		m.Data = data
	}
	return &m, nil
}

func messageArgs(m *vigil.Message) []any {
	return []any{m.ID, m.Recipient, nullStr(m.WatchID), string(m.Type), m.Text, rawText(m.Data), m.CreatedAt.UnixMilli()}
}
