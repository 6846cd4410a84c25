package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// A batch's rows are inserted naming only the columns some row of a chunk
// holds a value for (watchColumnsOf); every watch reads back as it was
// given, whatever its optional fields, within a chunk of watches that set
// others, and past maxWatchHeads sets of columns (every column then).
func TestCreateManyWritesEveryColumn(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "v.db"), nil)
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	n := 0
	mk := func() *vigil.Watch {
		n++
		w := &vigil.Watch{ID: fmt.Sprintf("w%05d", n), Kind: vigil.KindHTTP, Recipient: fmt.Sprintf("r%d", n%5),
			State: vigil.StatePending, CreatedAt: at, Predicate: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
		w.Identity = vigil.Identity(w.Recipient, w.Kind, vigil.ModeUntil, w.Predicate)
		set := func() bool { return rng.IntN(3) == 0 }
		if set() {
			w.Mode = vigil.ModeUnless
		}
		if set() {
			w.Every = time.Duration(1+rng.IntN(60)) * time.Second
		}
		if set() {
			w.Deadline = at.Add(time.Hour)
		}
		if set() {
			w.StartAt = at.Add(time.Minute)
		}
		if set() {
			w.Polls = 1 + rng.IntN(9)
		}
		if set() {
			w.Standing = true
		}
		if set() {
			w.Note = "note " + w.ID
		}
		if set() {
			w.Labels = map[string]string{"team": "a"}
		}
		if set() {
			w.Deliver = json.RawMessage(`{"webhook":{"url":"https://example.com/h"}}`)
		}
		if set() {
			w.Stable, w.StableFor = 2, 30*time.Second
		}
		if set() {
			w.MaxPolls, w.MaxErrors = 5, 3
		}
		if set() {
			w.ChainDepth = 2
		}
		if set() {
			w.TokenID = "tok1"
		}
		if set() {
			w.Errors, w.ConsecutiveErrors, w.CheckedAt = 2, 1, at.Add(time.Second)
		}
		return w
	}
	for batch := range 40 {
		size := []int{1, 3, 17, 300}[batch%4]
		ps := make([]vigil.WatchCreateParams, size)
		for i := range ps {
			ps[i] = vigil.WatchCreateParams{Watch: mk()}
		}
		res, err := s.WatchCreateMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Watch == nil || r.Watch.Existing {
				t.Fatalf("batch %d item %d: %+v %v", batch, i, r.Watch, r.Err)
			}
			got, err := s.WatchGet(ctx, ps[i].Watch.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r.Watch) {
				t.Fatalf("batch %d: watch %s reads back\n%+v\nwant\n%+v", batch, got.ID, got, r.Watch)
			}
		}
	}
	var heads int
	if err := s.w.do(ctx, func(t *wtx) error { heads = len(t.watchHeads); return nil }); err != nil {
		t.Fatal(err)
	}
	if heads < maxWatchHeads || heads > maxWatchHeads+1 {
		t.Errorf("%d sets of columns prepared, want the bound, %d, and every column past it", heads, maxWatchHeads)
	}
}
