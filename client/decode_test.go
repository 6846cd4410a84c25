package client

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// batchAnswer is the daemon's answer to a batch of n registrations, as it
// writes it, with a newline after it.
func batchAnswer(tb testing.TB, n int) []byte {
	tb.Helper()
	at := time.Date(2026, 12, 5, 18, 0, 0, 0, time.UTC)
	r := wire.BatchResponse{Results: make([]wire.BatchItem, n)}
	for i := range r.Results {
		if i%10 == 9 {
			r.Results[i] = wire.BatchItem{Status: "refused", Error: &wire.BatchError{Code: "invalid_request", Message: "no"}}
			continue
		}
		r.Results[i] = wire.BatchItem{Status: vigil.BatchCreated, Watch: &vigil.Watch{ID: fmt.Sprintf("01KB7S9J1W0X2Y3Z4A5B%06d", i),
			Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-12-05T18:00:00.000Z"}`), Recipient: fmt.Sprint("r", i),
			State: vigil.StatePending, Mode: vigil.ModeUntil, Deadline: at, CreatedAt: at.Add(-time.Hour), NextDue: at, Note: fmt.Sprint(i)}}
	}
	b, err := r.AppendJSON(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

// TestDecodeAsEncodingJSON: decode, which hands a response straight to a
// type's own decoder, answers what encoding/json answers, for answers the
// daemon writes and for texts that are not JSON or not whole.
func TestDecodeAsEncodingJSON(t *testing.T) {
	t.Parallel()
	good := batchAnswer(t, 20)
	for _, in := range [][]byte{good, good[:len(good)-1], []byte(" \n" + string(good)), good[:len(good)/2], append(good[:len(good):len(good)], "x"...),
		[]byte(`{"results":[]}`), []byte(`{"results":[{"status":"created","watch":{"id":"a","created_at":"bad"}}]}`), []byte(`null`), []byte(``)} {
		var want, got wire.BatchResponse
		werr := json.Unmarshal(in, &want)
		gerr := decode(in, &got)
		if (werr != nil) != (gerr != nil) || !cmp.Equal(got, want) {
			t.Errorf("decode(%.60q) = %v, %v; encoding/json gives %v, %v", in, got, gerr, want, werr)
		}
		var wantW, gotW vigil.Watch
		werr = json.Unmarshal(in, &wantW)
		gerr = decode(in, &gotW)
		if (werr != nil) != (gerr != nil) {
			t.Errorf("decode(%.60q) into a watch: %v; encoding/json: %v", in, gerr, werr)
		}
	}
}

// BenchmarkDecodeBatch decodes the answer to a batch of 1 000
// registrations as the client does (decode) and through encoding/json.
func BenchmarkDecodeBatch(b *testing.B) {
	in := batchAnswer(b, 1000)
	for _, c := range []struct {
		name string
		dec  func([]byte, any) error
	}{{"decode", decode}, {"encoding-json", json.Unmarshal}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r wire.BatchResponse
				if err := c.dec(in, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
