package engine_test

import (
	"fmt"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestWatchMessages: WatchMessages returns a watch's messages, its outcome
// among them, however many messages its recipient's mailbox held before
// it; within the caller's scope, as reading the watch is: another
// recipient's token gets not_found.
func TestWatchMessages(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: []byte(`{"in":"1h"}`)})
	for i := range 10_001 {
		m := &vigil.Message{ID: fmt.Sprintf("n%05d", i), Recipient: w.Recipient, Type: vigil.MessageNote, Text: "note", CreatedAt: t0}
		if _, err := v.store.MessageCreate(v.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	ms, err := v.eng.WatchMessages(v.ctx, w.ID)
	if err != nil || len(ms) != 1 || ms[0].WatchID != w.ID || ms[0].Type != vigil.MessageCancelled {
		t.Fatalf("WatchMessages = %+v, %v; want its cancellation", ms, err)
	}
	mine := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{w.Recipient}})
	if ms, err := v.eng.WatchMessages(mine, w.ID); err != nil || len(ms) != 1 {
		t.Errorf("WatchMessages by its recipient's token = %+v, %v; want its cancellation", ms, err)
	}
	other := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"someone-else"}})
	if ms, err := v.eng.WatchMessages(other, w.ID); vigil.ErrorCode(err) != vigil.CodeNotFound || ms != nil {
		t.Errorf("WatchMessages by another recipient's token = %+v, %v; want not_found", ms, err)
	}
	if _, err := v.eng.WatchMessages(v.ctx, "no-such-watch"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("WatchMessages of an unknown id: %v; want not_found", err)
	}
}
