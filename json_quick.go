package vigil

import (
	"encoding/json"
	"time"

	"github.com/vigil-run/vigil/internal/jsonscan"
)

// quickWatch decodes the watch JSON that Watch.MarshalJSON writes without
// reflection: the Go client reads one for every registration, and a
// thousand for every batch, where encoding/json's reflection over
// watchJSON cost more than the rest of the client's work. It reports false,
// having changed nothing, for anything it does not read exactly as
// encoding/json would: a key it does not know or that comes twice, an
// escape or invalid UTF-8 in a key or a string, a null, a number that is
// not a plain integer, a time or duration that does not parse, text that is
// not JSON. Watch.UnmarshalJSON then decodes b as before, so the answer
// (and every error) stays that of encoding/json (TestQuickWatchMatches).
func quickWatch(b []byte, w *Watch) bool {
	s := quickScanner{jsonscan.Scanner{B: b}}
	s.Space()
	var out Watch
	var seen uint64
	ok := s.Object(func(key string) bool {
		f, known := watchField(key)
		if !known || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		return s.field(f, &out)
	})
	return ok && s.end(w, &out)
}

// The fields quickWatch reads (watchField names them by their JSON key).
const (
	wfID = iota
	wfKind
	wfPredicate
	wfRecipient
	wfState
	wfMode
	wfEvery
	wfDeadline
	wfStartAt
	wfCreatedAt
	wfNextDue
	wfSettledAt
	wfPolls
	wfErrors
	wfConsecutiveErrors
	wfCheckedAt
	wfLastObservation
	wfOutcome
	wfReceipts
	wfNote
	wfLabels
	wfStable
	wfStableFor
	wfMaxPolls
	wfMaxErrors
	wfStanding
	wfDeliver
	wfAnsweredAtCreation
	wfExisting
	wfAskedDeadline
	wfAskedDeliver
	wfCompletionToken
	wfCompletionURL
	wfUnreadable
)

// watchField returns the field of a JSON key of watchJSON.
func watchField(key string) (int, bool) {
	switch key {
	case "id":
		return wfID, true
	case "kind":
		return wfKind, true
	case "predicate":
		return wfPredicate, true
	case "recipient":
		return wfRecipient, true
	case "state":
		return wfState, true
	case "mode":
		return wfMode, true
	case "every":
		return wfEvery, true
	case "deadline":
		return wfDeadline, true
	case "start_at":
		return wfStartAt, true
	case "created_at":
		return wfCreatedAt, true
	case "next_due":
		return wfNextDue, true
	case "settled_at":
		return wfSettledAt, true
	case "polls":
		return wfPolls, true
	case "errors":
		return wfErrors, true
	case "consecutive_errors":
		return wfConsecutiveErrors, true
	case "checked_at":
		return wfCheckedAt, true
	case "last_observation":
		return wfLastObservation, true
	case "outcome":
		return wfOutcome, true
	case "receipts":
		return wfReceipts, true
	case "note":
		return wfNote, true
	case "labels":
		return wfLabels, true
	case "stable":
		return wfStable, true
	case "stable_for":
		return wfStableFor, true
	case "max_polls":
		return wfMaxPolls, true
	case "max_errors":
		return wfMaxErrors, true
	case "standing":
		return wfStanding, true
	case "deliver":
		return wfDeliver, true
	case "answered_at_creation":
		return wfAnsweredAtCreation, true
	case "existing":
		return wfExisting, true
	case "asked_deadline":
		return wfAskedDeadline, true
	case "asked_deliver":
		return wfAskedDeliver, true
	case "completion_token":
		return wfCompletionToken, true
	case "completion_url":
		return wfCompletionURL, true
	case "unreadable":
		return wfUnreadable, true
	}
	return 0, false
}

// quickScanner is jsonscan.Scanner with what a Watch needs besides.
type quickScanner struct{ jsonscan.Scanner }

// end accepts the object just closed if only white space follows it.
func (s *quickScanner) end(w, out *Watch) bool {
	s.Space()
	if s.I != len(s.B) {
		return false
	}
	*w = *out
	return true
}

// composite returns the bytes of the object or array that comes next,
// checked to be JSON.
func (s *quickScanner) composite() ([]byte, bool) {
	if s.I >= len(s.B) || (s.B[s.I] != '{' && s.B[s.I] != '[') {
		return nil, false
	}
	v, ok := s.Skip()
	return v, ok && json.Valid(v)
}

// field reads the value of field f into w.
func (s *quickScanner) field(f int, w *Watch) bool {
	str := func(dst *string) bool {
		v, ok := s.PlainString()
		*dst = v
		return ok
	}
	tm := func(dst *time.Time) bool {
		v, ok := s.PlainString()
		if !ok {
			return false
		}
		t, err := ParseTime(v)
		*dst = t
		return err == nil
	}
	dur := func(dst *time.Duration) bool {
		v, ok := s.PlainString()
		if !ok {
			return false
		}
		if v == "" {
			return true
		}
		d, err := ParseDuration(v)
		*dst = d
		return err == nil
	}
	num := func(dst *int) bool {
		v, ok := s.Integer()
		*dst = v
		return ok
	}
	flag := func(dst *bool) bool {
		v, ok := s.Boolean()
		*dst = v
		return ok
	}
	raw := func(dst *json.RawMessage) bool {
		if len(s.B)-s.I >= 4 && string(s.B[s.I:s.I+4]) == "null" {
			// json.RawMessage keeps a null as its four bytes.
			s.I += 4
			*dst = json.RawMessage("null")
			return true
		}
		v, ok := s.composite()
		*dst = append(json.RawMessage(nil), v...)
		return ok
	}
	// decoded hands an object or array to encoding/json, as the field of
	// watchJSON would be.
	decoded := func(dst any) bool {
		v, ok := s.composite()
		return ok && json.Unmarshal(v, dst) == nil
	}
	switch f {
	case wfID:
		return str(&w.ID)
	case wfKind:
		return str((*string)(&w.Kind))
	case wfPredicate:
		return raw(&w.Predicate)
	case wfRecipient:
		return str(&w.Recipient)
	case wfState:
		return str((*string)(&w.State))
	case wfMode:
		return str((*string)(&w.Mode))
	case wfEvery:
		return dur(&w.Every)
	case wfDeadline:
		return tm(&w.Deadline)
	case wfStartAt:
		return tm(&w.StartAt)
	case wfCreatedAt:
		return tm(&w.CreatedAt)
	case wfNextDue:
		return tm(&w.NextDue)
	case wfSettledAt:
		return tm(&w.SettledAt)
	case wfPolls:
		return num(&w.Polls)
	case wfErrors:
		return num(&w.Errors)
	case wfConsecutiveErrors:
		return num(&w.ConsecutiveErrors)
	case wfCheckedAt:
		return tm(&w.CheckedAt)
	case wfLastObservation:
		w.LastObservation = new(Observation)
		return decoded(w.LastObservation)
	case wfOutcome:
		w.Outcome = new(Outcome)
		return decoded(w.Outcome)
	case wfReceipts:
		return decoded(&w.Receipts)
	case wfNote:
		return str(&w.Note)
	case wfLabels:
		m, ok := s.Labels(true)
		w.Labels = m
		return ok
	case wfStable:
		return num(&w.Stable)
	case wfStableFor:
		return dur(&w.StableFor)
	case wfMaxPolls:
		return num(&w.MaxPolls)
	case wfMaxErrors:
		return num(&w.MaxErrors)
	case wfStanding:
		return flag(&w.Standing)
	case wfDeliver:
		return raw(&w.Deliver)
	case wfAnsweredAtCreation:
		return flag(&w.AnsweredAtCreation)
	case wfExisting:
		return flag(&w.Existing)
	case wfAskedDeadline:
		return tm(&w.AskedDeadline)
	case wfAskedDeliver:
		return raw(&w.AskedDeliver)
	case wfCompletionToken:
		return str(&w.CompletionToken)
	case wfCompletionURL:
		return str(&w.CompletionURL)
	case wfUnreadable:
		return str(&w.Unreadable)
	}
	return false
}
