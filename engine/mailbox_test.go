package engine_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
)

func TestMailboxReaders(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	for i := range 3 {
		v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":"%dm"}`, i+1))})
	}
	v.tick(t0.Add(2 * time.Minute)) // two fire
	read := func(reader string) []int64 {
		t.Helper()
		p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-1", Reader: reader, Ack: true})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, m := range p.Messages {
			seqs = append(seqs, m.Seq)
		}
		return seqs
	}
	a1, b1 := read("a"), read("b")
	if len(a1) != 2 || len(b1) != 2 {
		t.Fatalf("readers a and b first read %v and %v, want 2 messages each", a1, b1)
	}
	if again := read("a"); len(again) != 0 {
		t.Fatalf("reader a sees %v again after ack", again)
	}
	v.tick(t0.Add(3 * time.Minute))
	a2, b2 := read("a"), read("b")
	if len(a2) != 1 || len(b2) != 1 || a2[0] != b2[0] || a2[0] <= a1[1] {
		t.Fatalf("after a third message: a %v, b %v; want the same one new message each", a2, b2)
	}
	if late := read("c"); len(late) != 3 {
		t.Fatalf("a new reader sees %v, want the backlog of 3", late)
	}
}

func TestMailboxLongPoll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, envOpts{})
		v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1m"}`)})
		got := make(chan vigil.MessagesPage, 1)
		go func() {
			p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-1", Reader: "r", Wait: 50 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		synctest.Wait() // the read is blocked on an empty mailbox
		select {
		case p := <-got:
			t.Fatalf("long-poll returned %+v before any message", p)
		default:
		}
		v.tick(t0.Add(time.Minute))
		synctest.Wait()
		select {
		case p := <-got:
			if len(p.Messages) != 1 || p.Messages[0].Type != vigil.MessageFired {
				t.Fatalf("long-poll returned %+v, want the fired message", p.Messages)
			}
		default:
			t.Fatal("long-poll did not return when the message arrived")
		}
	})
}

func TestRecipientCloseIsSilent(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	for i := range 3 {
		v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":"%dm"}`, i+1))})
	}
	res, err := v.eng.CloseRecipient(v.ctx, "agent-1")
	if err != nil || res.Cancelled != 3 {
		t.Fatalf("CloseRecipient = %+v, %v; want 3 cancelled", res, err)
	}
	v.tick(t0.Add(time.Hour))
	if msgs := v.messages("agent-1"); len(msgs) != 0 {
		t.Fatalf("closing a recipient mailed %+v, want silence", msgs)
	}
	if v.sched.Len() != 0 {
		t.Fatal("closed watches are still scheduled")
	}
}

// TestAckBeyondNewestIsRefused: an ack names a message read, so a seq past
// the newest message is refused, naming the field: taken, it moved the
// reader's cursor past every message yet to come, which that reader then
// never saw. An ack within what exists still moves the cursor, never back.
func TestAckBeyondNewestIsRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1m"}`)})
	v.tick(t0.Add(time.Minute))
	p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-1"})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("read %v, %v; want the one outcome", p.Messages, err)
	}
	newest := p.Messages[0].Seq
	err = v.eng.Ack(v.ctx, vigil.AckRequest{Recipient: "agent-1", Reader: "r", Seq: newest + 1000})
	if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "seq" {
		t.Fatalf("ack past the newest message: %v, want invalid_request on seq", err)
	}
	v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1m"}`)})
	v.tick(t0.Add(3 * time.Minute))
	p, err = v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: "agent-1", Reader: "r"})
	if err != nil || len(p.Messages) != 2 {
		t.Fatalf("reader r after the refused ack reads %v, %v; want both messages", p.Messages, err)
	}
	if err := v.eng.Ack(v.ctx, vigil.AckRequest{Recipient: "agent-1", Reader: "r", Seq: newest}); err != nil {
		t.Fatalf("ack of the newest message read: %v", err)
	}
}
