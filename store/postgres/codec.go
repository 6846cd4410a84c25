package postgres

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
)

// watchColumns are the columns of a watch, in the order scanWatch and
// watchArgs use.
const watchColumns = `id, recipient, kind, state, identity, created_at, predicate, mode, every_ms,
	deadline, start_at, settled_at, polls, standing, note, labels, deliver, stable, stable_for_ms,
	max_polls, max_errors, chain_depth, token_id, answered_at_creation, last_observation, outcome, receipts,
	errors, consecutive_errors, checked_at`

// watchColumnCount is how many watchColumns there are.
const watchColumnCount = 30

const messageColumns = `seq, id, recipient, watch_id, type, text, data, created_at`

// placeholders returns "$from, $from+1, …" with n marks.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	return b.String()
}

// ms encodes a time as unix milliseconds; the zero time is NULL.
func ms(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixMilli()
	return &n
}

// msTime decodes ms.
func msTime(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v).UTC()
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
func durMS(d time.Duration) *int64 {
	if d == 0 {
		return nil
	}
	n := d.Milliseconds()
	return &n
}

// nullInt encodes zero as NULL, to keep rows small.
func nullInt(n int) *int64 {
	if n == 0 {
		return nil
	}
	v := int64(n)
	return &v
}

func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// rawText binds raw JSON as TEXT; empty is NULL.
func rawText(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// jsonText marshals v as TEXT; nil (a nil pointer, map or slice) is NULL.
func jsonText(v any) (*string, error) {
	b, err := settlement.JSON(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	s := string(b)
	return &s, nil
}

func cmpOr[T comparable](v, fallback T) T {
	var zero T
	if v == zero {
		return fallback
	}
	return v
}

// encodedWatch is a watch as it is stored, with the JSON columns encoded.
type encodedWatch struct {
	labels, receipts, lastObs, outcome *string
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
		w.ID, w.Recipient, string(w.Kind), string(w.State), w.Identity, w.CreatedAt.UnixMilli(),
		rawText(w.Predicate), nullStr(string(w.Mode)), durMS(w.Every),
		ms(w.Deadline), ms(w.StartAt), ms(w.SettledAt), w.Polls, w.Standing,
		nullStr(w.Note), e.labels, rawText(w.Deliver), nullInt(w.Stable), durMS(w.StableFor),
		nullInt(w.MaxPolls), nullInt(w.MaxErrors), nullInt(w.ChainDepth), nullStr(w.TokenID),
		w.AnsweredAtCreation, e.lastObs, e.outcome, e.receipts,
		nullInt(w.Errors), nullInt(w.ConsecutiveErrors), ms(w.CheckedAt),
	}
}

// stored returns w as WatchGet will return it once e is written: times in
// UTC at milliseconds, durations at milliseconds, empty values nil, JSON
// values as they decode, and none of the per-call flags.
func (e encodedWatch) stored(w *vigil.Watch) (*vigil.Watch, error) {
	c := *w
	c.CreatedAt, c.Deadline, c.StartAt, c.SettledAt = truncTime(c.CreatedAt), truncTime(c.Deadline), truncTime(c.StartAt), truncTime(c.SettledAt)
	c.CheckedAt = truncTime(c.CheckedAt)
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
	for _, f := range []struct {
		v   *string
		dst any
	}{{e.labels, &c.Labels}, {e.receipts, &c.Receipts}} {
		if f.v != nil {
			if err := json.Unmarshal([]byte(*f.v), f.dst); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if e.lastObs != nil {
		if c.LastObservation, err = settlement.DecodeObservation([]byte(*e.lastObs)); err != nil {
			return nil, err
		}
	}
	if e.outcome != nil {
		if c.Outcome, err = settlement.DecodeOutcome([]byte(*e.outcome)); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// watchRow holds one row of watchColumns as pgx scans it.
type watchRow struct {
	id, recipient, kind, state, identity          string
	created                                       int64
	predicate, mode                               *string
	every, deadline, startAt, settled             *int64
	polls                                         int64
	standing                                      bool
	note, labels, deliver                         *string
	stable, stableFor, maxPolls, maxErrors, chain *int64
	tokenID                                       *string
	answered                                      bool
	lastObs, outcome, receipts                    *string
	errs, consecutive, checked                    *int64
}

func (r *watchRow) dest() []any {
	return []any{&r.id, &r.recipient, &r.kind, &r.state, &r.identity, &r.created, &r.predicate, &r.mode, &r.every,
		&r.deadline, &r.startAt, &r.settled, &r.polls, &r.standing, &r.note, &r.labels, &r.deliver, &r.stable, &r.stableFor,
		&r.maxPolls, &r.maxErrors, &r.chain, &r.tokenID, &r.answered, &r.lastObs, &r.outcome, &r.receipts,
		&r.errs, &r.consecutive, &r.checked}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func rawJSON(p *string) json.RawMessage {
	if p == nil {
		return nil
	}
	return json.RawMessage(*p)
}

// scanWatch reads watchColumns. The columns are typed, so only a JSON
// column that does not decode, or a state this build does not know, can be
// wrong: the watch then comes back with what could be read and Unreadable
// naming each column at fault, so one bad row never breaks a list.
func scanWatch(row pgx.Row) (*vigil.Watch, error) {
	var r watchRow
	if err := row.Scan(r.dest()...); err != nil {
		return nil, err
	}
	var bad []string
	w := &vigil.Watch{
		ID: r.id, Recipient: r.recipient, Kind: vigil.Kind(r.kind), State: vigil.State(r.state), Identity: r.identity,
		CreatedAt: time.UnixMilli(r.created).UTC(), Mode: vigil.Mode(deref(r.mode)),
		Every: time.Duration(deref(r.every)) * time.Millisecond, Deadline: msTime(r.deadline), StartAt: msTime(r.startAt),
		SettledAt: msTime(r.settled), Polls: int(r.polls), Standing: r.standing, Note: deref(r.note),
		Stable: int(deref(r.stable)), StableFor: time.Duration(deref(r.stableFor)) * time.Millisecond,
		MaxPolls: int(deref(r.maxPolls)), MaxErrors: int(deref(r.maxErrors)), ChainDepth: int(deref(r.chain)),
		TokenID: deref(r.tokenID), AnsweredAtCreation: r.answered,
		Errors: int(deref(r.errs)), ConsecutiveErrors: int(deref(r.consecutive)), CheckedAt: msTime(r.checked),
	}
	if w.State != "" && !w.State.Valid() {
		bad = append(bad, fmt.Sprintf("state: %q is not a state", clipText(r.state)))
	}
	for _, c := range []struct {
		col string
		v   *string
		dst *json.RawMessage
	}{{"predicate", r.predicate, &w.Predicate}, {"deliver", r.deliver, &w.Deliver}} {
		if c.v == nil {
			continue
		}
		if !json.Valid([]byte(*c.v)) {
			bad = append(bad, c.col+": not valid JSON")
			continue
		}
		*c.dst = rawJSON(c.v)
	}
	var errs [4]error
	if r.labels != nil {
		errs[0] = json.Unmarshal([]byte(*r.labels), &w.Labels)
	}
	if r.lastObs != nil {
		w.LastObservation, errs[1] = settlement.DecodeObservation([]byte(*r.lastObs))
	}
	if r.outcome != nil {
		w.Outcome, errs[2] = settlement.DecodeOutcome([]byte(*r.outcome))
	}
	if r.receipts != nil {
		errs[3] = json.Unmarshal([]byte(*r.receipts), &w.Receipts)
	}
	for i, col := range [4]string{"labels", "last_observation", "outcome", "receipts"} {
		if errs[i] != nil {
			bad = append(bad, col+": "+strings.TrimPrefix(errs[i].Error(), "json: "))
		}
	}
	// Half a value is worse than none.
	for _, b := range bad {
		switch {
		case strings.HasPrefix(b, "labels:"):
			w.Labels = nil
		case strings.HasPrefix(b, "last_observation:"):
			w.LastObservation = nil
		case strings.HasPrefix(b, "outcome:"):
			w.Outcome = nil
		case strings.HasPrefix(b, "receipts:"):
			w.Receipts = nil
		}
	}
	w.Unreadable = strings.Join(bad, "; ")
	return w, nil
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// collectWatches reads every row of rows as a watch.
func collectWatches(out []*vigil.Watch, rows pgx.Rows) ([]*vigil.Watch, error) {
	defer rows.Close()
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

func scanMessage(row pgx.Row) (*vigil.Message, error) {
	var (
		m       vigil.Message
		watchID *string
		typ     string
		data    *string
		created int64
	)
	if err := row.Scan(&m.Seq, &m.ID, &m.Recipient, &watchID, &typ, &m.Text, &data, &created); err != nil {
		return nil, err
	}
	m.WatchID, m.Type, m.CreatedAt = deref(watchID), vigil.MessageType(typ), time.UnixMilli(created).UTC()
	if data != nil {
		m.Data = json.RawMessage(*data)
	}
	return &m, nil
}

func pageLimit(n int) int {
	if n <= 0 {
		return listLimit
	}
	return min(n, listLimitMax)
}

// A list cursor is the (created_at, id) of the last watch of a page, as
// the SQLite store writes it.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMilli(), 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, error) {
	bad := vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "the list cursor %q is not one this server gave out", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	at, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return 0, "", bad
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil || !cursorID(id) {
		return 0, "", bad
	}
	return n, id, nil
}

// cursorID reports whether a cursor's id could be a watch's: 1 to 128
// bytes of printable ASCII. A tampered cursor's id of other bytes (not
// UTF-8, a NUL, which PostgreSQL refuses as a text) is refused as the
// cursor it is, not answered as an internal error.
func cursorID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func durOf(v *int64) time.Duration { return time.Duration(deref(v)) * time.Millisecond }
