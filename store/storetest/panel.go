package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// testListText: WatchList's Text keeps the watches whose note or predicate
// holds it, ignoring the case of ASCII letters, with LIKE's wildcards
// taken literally; it combines with the other filters and pages.
func testListText(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	notes := map[string]string{"w1": "Deploy of Billing", "w2": "billing 100% done", "w3": "nothing here", "w4": "bill_ing", "w5": "Élan BILLING"}
	for i, id := range []string{"w1", "w2", "w3", "w4", "w5"} {
		w := httpWatch(id, "r", i, base.Add(time.Duration(i)*time.Second))
		w.Note = notes[id]
		if id == "w5" {
			w.Recipient = "other"
		}
		create(t, s, w)
	}
	list := func(p vigil.WatchListParams) []string {
		t.Helper()
		var ids []string
		for {
			page, err := s.WatchList(ctx, p)
			if err != nil {
				t.Fatalf("WatchList(%+v): %v", p, err)
			}
			for _, w := range page.Watches {
				ids = append(ids, w.ID)
			}
			if page.Next == "" {
				break
			}
			p.After = page.Next
		}
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		p    vigil.WatchListParams
		want []string
	}{
		{vigil.WatchListParams{Text: "billing"}, []string{"w1", "w2", "w5"}},
		{vigil.WatchListParams{Text: "BILLING", Limit: 1}, []string{"w1", "w2", "w5"}},
		{vigil.WatchListParams{Text: "billing", Recipient: "r"}, []string{"w1", "w2"}},
		{vigil.WatchListParams{Text: "100%"}, []string{"w2"}},
		{vigil.WatchListParams{Text: "l_i"}, []string{"w4"}},
		{vigil.WatchListParams{Text: "élan"}, nil},
		{vigil.WatchListParams{Text: "Élan"}, []string{"w5"}},
		{vigil.WatchListParams{Text: "example.com/3"}, []string{"w4"}},
		{vigil.WatchListParams{Text: "zz"}, nil},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("Text %q (recipient %q): %v, want %v", tc.p.Text, tc.p.Recipient, got, tc.want)
		}
	}
	// A deleted watch is found no more.
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", SettledAt: base.Add(time.Minute),
		Outcome: &vigil.Outcome{State: vigil.StateCancelled, Reason: "cancelled", Sentence: "cancelled"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchDelete(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	if got := list(vigil.WatchListParams{Text: "billing"}); !slices.Equal(got, []string{"w1", "w5"}) {
		t.Errorf("Text billing after deleting w2: %v, want [w1 w5]", got)
	}
	// A long note and a long predicate (past what a store may keep beside
	// the watch for this filter) are searched whole, among short ones.
	long := httpWatch("w6", "r", 6, base.Add(6*time.Second))
	long.Note = strings.Repeat("padding ", 250) + "Longword"
	create(t, s, long)
	create(t, s, newWatch("w7", "r", vigil.KindHTTP, `{"url":"https://example.com/`+strings.Repeat("p", 2000)+`/DeepWord"}`, base.Add(7*time.Second)))
	create(t, s, newWatch("w8", "r", vigil.KindHTTP, `{"url":"https://example.com/deepword-longword"}`, base.Add(8*time.Second)))
	for _, tc := range []struct {
		p    vigil.WatchListParams
		want []string
	}{
		{vigil.WatchListParams{Text: "LONGWORD"}, []string{"w6", "w8"}},
		{vigil.WatchListParams{Text: "longword", Limit: 1}, []string{"w6", "w8"}},
		{vigil.WatchListParams{Text: "deepword"}, []string{"w7", "w8"}},
		{vigil.WatchListParams{Text: "padding padding"}, []string{"w6"}},
		{vigil.WatchListParams{Text: "billing"}, []string{"w1", "w5"}},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("Text %q among long texts: %v, want %v", tc.p.Text, got, tc.want)
		}
	}
	// Labels filter the same way, and a deleted watch's labels go with it.
	if got := list(vigil.WatchListParams{Labels: map[string]string{"team": "a"}}); len(got) != 0 {
		t.Errorf("label team=a: %v, want none", got)
	}
}

// testWatchCounts: WatchCounts counts by state and kind, within a set of
// recipients when given.
func testWatchCounts(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	create(t, s, httpWatch("w1", "r1", 1, base))
	create(t, s, httpWatch("w2", "r1", 2, base))
	create(t, s, httpWatch("w3", "r2", 3, base))
	create(t, s, newWatch("w4", "r2", vigil.KindTimer, `{"at":"2030-01-01T00:00:00Z"}`, base))
	won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w2", State: vigil.StateFired,
		Outcome: &vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Sentence: "done"}, SettledAt: base.Add(5 * time.Second)}})
	if err != nil || !won[0] {
		t.Fatalf("WatchSettle = %v, %v", won, err)
	}
	count := func(recipients ...string) map[string]int {
		t.Helper()
		cs, err := s.WatchCounts(ctx, recipients)
		if err != nil {
			t.Fatalf("WatchCounts(%v): %v", recipients, err)
		}
		out := map[string]int{}
		for _, c := range cs {
			out[string(c.State)+"/"+string(c.Kind)] += c.N
		}
		return out
	}
	if got, want := count(), map[string]int{"pending/http": 2, "fired/http": 1, "pending/timer": 1}; !mapsEqual(got, want) {
		t.Errorf("WatchCounts() = %v, want %v", got, want)
	}
	if got, want := count("r1"), map[string]int{"pending/http": 1, "fired/http": 1}; !mapsEqual(got, want) {
		t.Errorf("WatchCounts(r1) = %v, want %v", got, want)
	}
	if got := count("nobody"); len(got) != 0 {
		t.Errorf("WatchCounts(nobody) = %v, want none", got)
	}
	// A cancel moves a watch between states, and a delete takes it out.
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", SettledAt: base.Add(time.Minute),
		Outcome: &vigil.Outcome{State: vigil.StateCancelled, Reason: "cancelled", Sentence: "cancelled"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchDelete(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	if got, want := count(), map[string]int{"pending/http": 1, "cancelled/http": 1, "pending/timer": 1}; !mapsEqual(got, want) {
		t.Errorf("WatchCounts() after a cancel and a delete = %v, want %v", got, want)
	}
	if got, want := count("r1"), map[string]int{"cancelled/http": 1}; !mapsEqual(got, want) {
		t.Errorf("WatchCounts(r1) after a cancel and a delete = %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
