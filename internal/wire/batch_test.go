package wire_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// BatchResponse.AppendJSON writes what encoding/json writes for it.
func TestBatchResponseJSONMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "created", "existing", "refused", `q"uote`, "a<b", "a>b", "x&y", "tab\t", "héllo", "bad\xff"}
	str := func() string { return strs[r.IntN(len(strs))] }
	for i := range 2000 {
		var resp wire.BatchResponse
		if r.IntN(10) > 0 {
			resp.Results = []wire.BatchItem{}
		}
		for range r.IntN(5) {
			it := wire.BatchItem{Status: str(), Replayed: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				it.Watch = &vigil.Watch{ID: str(), Kind: vigil.KindTimer, Recipient: str(), State: vigil.StatePending,
					Predicate: json.RawMessage(`{"at": "2026-12-01T12:00:00.000Z"}`), Note: str(),
					CreatedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Existing: r.IntN(2) == 0}
			}
			if r.IntN(2) == 0 {
				it.Error = &wire.BatchError{Code: vigil.Code(str()), Message: str(), Field: str()}
			}
			resp.Results = append(resp.Results, it)
		}
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := resp.AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("response %d:\n got %s (%v)\nwant %s", i, got, err, want)
		}
	}
}
