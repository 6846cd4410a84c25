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
	// A predicate is stored as the engine canonicalised it, with &, < and >
	// escaped as encoding/json writes them (\u0026): a text holding them
	// finds it as written, in the predicate as in the note.
	amp := newWatch("w9", "r", vigil.KindHTTP, `{"done":[{"exists":true,"path":"a\u003eb"}],"url":"https://example.com/q?a=1\u0026B=2"}`, base.Add(9*time.Second))
	amp.Note = "Tom & Jerry <3"
	create(t, s, amp)
	for _, tc := range []struct {
		p    vigil.WatchListParams
		want []string
	}{
		{vigil.WatchListParams{Text: "q?a=1&b=2"}, []string{"w9"}},
		{vigil.WatchListParams{Text: "a>b"}, []string{"w9"}},
		{vigil.WatchListParams{Text: "tom & jerry <3"}, []string{"w9"}},
		{vigil.WatchListParams{Text: "q?a=1&b=2", Recipient: "r", Kind: vigil.KindHTTP}, []string{"w9"}},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("Text %q with & < >: %v, want %v", tc.p.Text, got, tc.want)
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

// testWatchCountsEveryPath: WatchCounts says what WatchList finds, for
// every recipient and for all, after each path that makes, moves or
// removes a watch: a batch with refused items, a settlement that fails
// whole, a settlement, a cancel, a close, a delete, a prune, a reopen.
func testWatchCountsEveryPath(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	check := func(s vigil.Store, when string) {
		t.Helper()
		for _, rs := range [][]string{nil, {"a"}, {"b"}, {"a", "b", "c"}} {
			cs, err := s.WatchCounts(ctx, rs)
			if err != nil {
				t.Fatalf("%s: WatchCounts(%v): %v", when, rs, err)
			}
			got := map[string]int{}
			for _, c := range cs {
				if c.N != 0 {
					got[string(c.State)+"/"+string(c.Kind)] += c.N
				}
			}
			want := map[string]int{}
			for after := ""; ; {
				page, err := s.WatchList(ctx, vigil.WatchListParams{Recipients: rs, After: after, Limit: 1000})
				if err != nil {
					t.Fatalf("%s: WatchList(%v): %v", when, rs, err)
				}
				for _, w := range page.Watches {
					want[string(w.State)+"/"+string(w.Kind)]++
				}
				if after = page.Next; after == "" {
					break
				}
			}
			if !mapsEqual(got, want) {
				t.Errorf("%s: WatchCounts(%v) = %v, the watches are %v", when, rs, got, want)
			}
		}
	}
	caps := func(w *vigil.Watch) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, MaxActive: 6, MaxActivePerRecipient: 3}
	}
	create(t, s, httpWatch("x1", "c", 100, base))
	res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{
		caps(httpWatch("a1", "a", 1, base)), caps(httpWatch("a2", "a", 2, base)), caps(httpWatch("a1-again", "a", 1, base)),
		caps(httpWatch("a3", "a", 3, base)), caps(httpWatch("a4", "a", 4, base)), // a4: past a's cap
		caps(httpWatch("x1", "b", 5, base)), // the id is taken
		{Watch: httpWatch("b1", "b", 6, base), IdempotencyKey: "k", RequestHash: "h"},
		{Watch: httpWatch("b2", "b", 7, base), IdempotencyKey: "k", RequestHash: "h-other"}, // idempotency_conflict
		caps(httpWatch("b3", "b", 8, base)), caps(httpWatch("b4", "b", 9, base)),            // b4: past the global cap
	})
	if err != nil {
		t.Fatal(err)
	}
	codes := ids(res, func(r vigil.WatchCreateResult) string { return string(vigil.ErrorCode(r.Err)) })
	if want := []string{"", "", "", "", "quota_exceeded", "conflict", "", "idempotency_conflict", "", "quota_exceeded"}; !slices.Equal(codes, want) {
		t.Errorf("the batch's codes = %q, want %q", codes, want)
	}
	check(s, "after a batch")
	if _, err := s.MessageCreate(ctx, message("stray", "a", "a2", vigil.MessageFired, base)); err != nil {
		t.Fatal(err)
	}
	_, err = s.WatchSettle(ctx, []vigil.WatchSettleParams{settle(httpWatch("a1", "a", 1, base), vigil.StateFired, "m-a1", base),
		settle(httpWatch("a2", "a", 2, base), vigil.StateFired, "m-a2", base)})
	wantCode(t, "WatchSettle with an outcome message that cannot be written", err, vigil.CodeConflict)
	check(s, "after a failed settlement")
	at := base.Add(time.Minute)
	settleAll(t, s, settle(httpWatch("a1", "a", 1, base), vigil.StateFired, "m-a1", at), settle(httpWatch("b1", "b", 6, base), vigil.StateExpired, "m-b1", at))
	check(s, "after a settlement")
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "b3", SettledAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	check(s, "after a cancel")
	if _, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "a", SettledAt: at.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	check(s, "after a close")
	if err := s.WatchDelete(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	check(s, "after a delete")
	if _, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: at.Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	check(s, "after a prune")
	check(reopen(), "after reopen")
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
