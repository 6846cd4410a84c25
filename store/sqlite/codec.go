package sqlite

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
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

// busy reports whether err is SQLite finding the database locked by
// another connection for longer than the busy timeout.
func busy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
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
// in the row (and the writer's identities keep it so, hexKey). Any other
// string is stored as TEXT, except one SQLite could take for a number: the
// identity column's type, ANY in a table that is not STRICT, gives it
// NUMERIC affinity, so TEXT such as "42", " 7" or "1.5" would be stored as
// a number and read back otherwise ("007" as 7). Such a string is stored as
// a BLOB of its bytes after a 0xFF byte (two when that would make 16
// bytes), which no UTF-8 text and no vigil.Identity (16 bytes exactly)
// reads as. A BLOB never equals a TEXT, and identityString reads each back
// as it was given.
func identityArg(s string) any {
	if len(s) == 32 {
		if b, err := hex.DecodeString(s); err == nil && hex.EncodeToString(b) == s {
			return b
		}
	}
	if !numberLike(s) {
		return s
	}
	mark := "\xff"
	if len(s)+len(mark) == 16 {
		mark = "\xff\xff"
	}
	return []byte(mark + s)
}

// identityString decodes identityArg. A number is an identity written
// before identityArg kept numbers as given: read as SQLite's text of it,
// as database/sql renders it into bytes.
func identityString(v any) string {
	switch v := v.(type) {
	case []byte:
		switch {
		case len(v) == 16:
			return hex.EncodeToString(v)
		case len(v) == 17 && v[0] == 0xff && v[1] == 0xff:
			return string(v[2:])
		case len(v) > 0 && v[0] == 0xff:
			return string(v[1:])
		}
		return hex.EncodeToString(v)
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

// numberLike reports whether s might be stored as a number under NUMERIC
// affinity: up to its first NUL byte (where SQLite stops reading it: "1\x00b"
// is stored as 1), after SQLite's white space, only digits, signs, points
// and exponents, one digit at least. That is wider than SQLite's
// well-formed literals (it takes "1-2"), which only costs those strings the
// BLOB form.
func numberLike(s string) bool {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(s, " \t\n\v\f\r")
	digit := false
	for i := range len(s) {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E':
		default:
			return false
		}
	}
	return digit
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

// jsonText marshals v as TEXT (settlement.JSON: an outcome or an
// observation writes itself).
func jsonText(v any) (any, error) {
	b, err := settlement.JSON(v)
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
	if err := decodeJSON(e.labels, &c.Labels); err != nil {
		return nil, err
	}
	if err := decodeJSON(e.receipts, &c.Receipts); err != nil {
		return nil, err
	}
	var err error
	if s, ok := e.lastObs.(string); ok {
		if c.LastObservation, err = settlement.DecodeObservation([]byte(s)); err != nil {
			return nil, err
		}
	}
	if s, ok := e.outcome.(string); ok {
		if c.Outcome, err = settlement.DecodeOutcome([]byte(s)); err != nil {
			return nil, err
		}
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

// scanWatch reads watchColumns. A column that does not decode (labels
// that are not JSON, a time stored as text) does not fail the read: the
// watch comes back with what could be read and Unreadable naming each
// column at fault, so one bad row never breaks a list for everyone.
func scanWatch(sc scanner) (*vigil.Watch, error) {
	var c [watchColumnCount]any
	dst := make([]any, len(c))
	for i := range c {
		dst[i] = &c[i]
	}
	if err := sc.Scan(dst...); err != nil {
		return nil, err
	}
	var (
		w vigil.Watch
		d rowDecoder
	)
	w.ID = d.id(c[0])
	w.Recipient = d.text("recipient", c[1], false)
	w.Kind = vigil.Kind(d.text("kind", c[2], false))
	w.State = vigil.State(d.text("state", c[3], false))
	if w.State != "" && !w.State.Valid() {
		d.fail("state", "%q is not a state", clipText(string(w.State)))
	}
	w.Identity = identityString(c[4])
	w.CreatedAt = d.time("created_at", c[5], false)
	w.Predicate = d.rawJSON("predicate", c[6])
	w.Mode = vigil.Mode(d.text("mode", c[7], true))
	w.Every = d.duration("every_ms", c[8])
	w.Deadline = d.time("deadline", c[9], true)
	w.StartAt = d.time("start_at", c[10], true)
	w.SettledAt = d.time("settled_at", c[11], true)
	w.Polls = int(d.integer("polls", c[12], false))
	w.Standing = d.boolean("standing", c[13])
	w.Note = d.text("note", c[14], true)
	w.Labels = decodeColumn[map[string]string](&d, "labels", c[15])
	w.Deliver = d.rawJSON("deliver", c[16])
	w.Stable = int(d.integer("stable", c[17], true))
	w.StableFor = d.duration("stable_for_ms", c[18])
	w.MaxPolls = int(d.integer("max_polls", c[19], true))
	w.MaxErrors = int(d.integer("max_errors", c[20], true))
	w.ChainDepth = int(d.integer("chain_depth", c[21], true))
	w.TokenID = d.text("token_id", c[22], true)
	w.AnsweredAtCreation = d.boolean("answered_at_creation", c[23])
	w.Outcome = decodeColumnWith(&d, "outcome", c[25], settlement.DecodeOutcome)
	w.LastObservation = d.lastObservation(c[24], w.Outcome)
	w.Receipts = decodeColumn[[]vigil.Receipt](&d, "receipts", c[26])
	w.Errors = int(d.integer("errors", c[27], true))
	w.ConsecutiveErrors = int(d.integer("consecutive_errors", c[28], true))
	w.CheckedAt = d.time("checked_at", c[29], true)
	w.Unreadable = d.reason()
	return &w, nil
}

// observationInOutcome is what last_observation holds when the watch's
// last observation is its outcome's (schema 15): a settlement's, which
// settlement.Prepare takes from the outcome, so the row does not hold it
// twice. It is not JSON, so no observation is ever stored as it.
const observationInOutcome = "="

// lastObservation decodes the last_observation column v of a watch whose
// outcome is outcome.
func (d *rowDecoder) lastObservation(v any, outcome *vigil.Outcome) *vigil.Observation {
	if s, ok := v.(string); !ok || s != observationInOutcome {
		return decodeColumnWith(d, "last_observation", v, settlement.DecodeObservation)
	}
	if outcome == nil || outcome.Observation == nil {
		d.fail("last_observation", "is the outcome's observation, and the outcome has none")
		return nil
	}
	o := *outcome.Observation // its facts are shared: observations are values, never changed
	return &o
}

// rowDecoder decodes the columns of one row as the driver gave them
// (int64, float64, string, []byte or nil), noting each that does not
// decode instead of failing: see scanWatch.
type rowDecoder struct{ bad []string }

func (d *rowDecoder) fail(col, format string, args ...any) {
	d.bad = append(d.bad, col+": "+fmt.Sprintf(format, args...))
}

// reason is what was wrong with the row, "" when nothing was.
func (d *rowDecoder) reason() string { return strings.Join(d.bad, "; ") }

// id reads the id, whatever it was stored as: a row is listed by it.
func (d *rowDecoder) id(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		d.fail("id", "missing")
		return ""
	}
	d.fail("id", "holds %s, not text", sqlType(v))
	return fmt.Sprint(v)
}

func (d *rowDecoder) text(col string, v any, null bool) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		if !null {
			d.fail(col, "missing")
		}
		return ""
	}
	d.fail(col, "holds %s, not text", sqlType(v))
	return ""
}

func (d *rowDecoder) integer(col string, v any, null bool) int64 {
	n, _ := d.integerOK(col, v, null)
	return n
}

// integerOK is integer, reporting false for NULL and for what is not one.
func (d *rowDecoder) integerOK(col string, v any, null bool) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case nil:
		if !null {
			d.fail(col, "missing")
		}
		return 0, false
	}
	d.fail(col, "holds %s, not a whole number", sqlType(v))
	return 0, false
}

// time reads unix milliseconds; NULL (or what is not a number) is the
// zero time.
func (d *rowDecoder) time(col string, v any, null bool) time.Time {
	n, ok := d.integerOK(col, v, null)
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func (d *rowDecoder) duration(col string, v any) time.Duration {
	return time.Duration(d.integer(col, v, true)) * time.Millisecond
}

func (d *rowDecoder) boolean(col string, v any) bool {
	switch d.integer(col, v, false) {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(col, "holds %v, not 0 or 1", v)
	return false
}

func bytesOf(v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return []byte(x), true
	case []byte:
		return x, true
	}
	return nil, false
}

// rawJSON reads a JSON text kept as it is; one that is not valid JSON is
// dropped (it could not be shown).
func (d *rowDecoder) rawJSON(col string, v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, ok := bytesOf(v)
	if !ok {
		d.fail(col, "holds %s, not JSON text", sqlType(v))
		return nil
	}
	if !json.Valid(b) {
		d.fail(col, "not valid JSON")
		return nil
	}
	return b
}

// decodeColumn decodes a JSON column; NULL, and a column that does not
// decode (noted in d), are the zero value: half a value is worse than
// none.
func decodeColumn[T any](d *rowDecoder, col string, v any) T {
	return decodeColumnWith(d, col, v, func(b []byte) (T, error) {
		var out T
		err := json.Unmarshal(b, &out)
		return out, err
	})
}

// decodeColumnWith is decodeColumn with decode reading the JSON text
// (an observation's or outcome's facts keep their numbers exact).
func decodeColumnWith[T any](d *rowDecoder, col string, v any, decode func([]byte) (T, error)) T {
	var zero T
	if v == nil {
		return zero
	}
	b, ok := bytesOf(v)
	if !ok {
		d.fail(col, "holds %s, not JSON text", sqlType(v))
		return zero
	}
	out, err := decode(b)
	if err != nil {
		d.fail(col, "%s", strings.TrimPrefix(err.Error(), "json: "))
		return zero
	}
	return out
}

// sqlType names what the driver gave for a column.
func sqlType(v any) string {
	switch v.(type) {
	case int64:
		return "an integer"
	case float64:
		return "a real number"
	case string:
		return "text"
	case []byte:
		return "a blob"
	}
	return fmt.Sprintf("a %T", v)
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
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

// textOrNull binds s as TEXT, nil as NULL.
func textOrNull(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
