package wire

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// BatchResponse.UnmarshalJSON gives what encoding/json gives, for what
// AppendJSON writes and for the near misses it leaves to encoding/json;
// an answer with plain strings goes the quick way.
func TestBatchResponseQuickMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	escaped := []string{"", "created", "existing", "refused", `q"uote`, "a<b", "tab\t", "héllo", "bad\xff"}
	plain := []string{"", "created", "existing", "refused", "héllo", "01KB7S9J1W0X2Y3Z4A5B6C7D8E"}
	var ins [][]byte
	for i := range 2000 {
		strs := escaped
		if i%2 == 0 {
			strs = plain
		}
		str := func() string { return strs[r.IntN(len(strs))] }
		resp := BatchResponse{Results: []BatchItem{}}
		for range r.IntN(5) {
			it := BatchItem{Status: str(), Replayed: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				it.Watch = &vigil.Watch{ID: str(), Kind: vigil.KindTimer, Recipient: str(), State: vigil.StatePending,
					Predicate: json.RawMessage(`{"at": "2026-12-01T12:00:00.000Z"}`), Note: str(), Labels: map[string]string{"a": str()},
					CreatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Existing: r.IntN(2) == 0}
			}
			if r.IntN(2) == 0 {
				it.Error = &BatchError{Code: vigil.Code(str()), Message: str(), Field: str()}
			}
			resp.Results = append(resp.Results, it)
		}
		b, err := resp.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			var got BatchResponse
			if !quickBatchResponse(b, &got) {
				t.Errorf("quickBatchResponse left a plain answer to encoding/json: %s", b)
			}
		}
		ins = append(ins, b)
	}
	for _, s := range []string{
		`{"results":[]}`, ` { "results" : [ { } , {"status":"created","replayed":false} ] } `, `{"results":null}`, `{}`,
		`{"results":[],"x":1}`, `{"Results":[]}`, `{"results":[{"status":"a","status":"b"}]}`, `{"results":[{"Status":"a"}]}`,
		`{"results":[{"watch":null}]}`, `{"results":[{"watch":{"id":"w","polls":1.5}}]}`, `{"results":[{"watch":{"id":"w"}x}]}`,
		`{"results":[{"error":{"code":"c","code":"d"}}]}`, `{"results":[{"error":{"code":1}}]}`, `{"results":[{"replayed":"yes"}]}`,
		`{"results":[{}]}x`, `{"results":[{},]}`, `{"results":[{}]`, `[]`, `null`, ``,
	} {
		ins = append(ins, []byte(s))
	}
	for _, b := range ins {
		type batchResponse BatchResponse // encoding/json alone, named as UnmarshalJSON's
		var want, got BatchResponse
		werr := json.Unmarshal(b, (*batchResponse)(&want))
		gerr := got.UnmarshalJSON(b)
		if (werr != nil) != (gerr != nil) || (werr != nil && werr.Error() != gerr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalJSON(%s) = %+v (%v), encoding/json gives %+v (%v)", b, got, gerr, want, werr)
		}
	}
}

// FuzzBatchResponseQuick: for any text, BatchResponse.UnmarshalJSON gives
// what encoding/json gives, the same answer or the same error.
func FuzzBatchResponseQuick(f *testing.F) {
	w := &vigil.Watch{ID: "w", Kind: vigil.KindTimer, Recipient: "r", State: vigil.StatePending,
		Predicate: json.RawMessage(`{"at":"2026-12-01T12:00:00.000Z"}`), CreatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	b, err := BatchResponse{Results: []BatchItem{{Status: "created", Watch: w}, {Status: "refused", Error: &BatchError{Code: "invalid_request", Message: "m", Field: "f"}}}}.AppendJSON(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range []string{`{"results":[]}`, `{"results":null}`, `{"results":[{"status":"a","status":"b"}]}`, `{"results":[{}]}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		type batchResponse BatchResponse
		var want, got BatchResponse
		werr := json.Unmarshal(b, (*batchResponse)(&want))
		gerr := got.UnmarshalJSON(b)
		if (werr != nil) != (gerr != nil) || (werr != nil && werr.Error() != gerr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalJSON(%q) = %+v (%v), encoding/json gives %+v (%v)", b, got, gerr, want, werr)
		}
	})
}
