package client_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestSubscribeResumesAcrossARestart holds, against a real daemon, that an
// event stream goes on across the daemon's restart on the same address
// and data dir: the messages written once it is back, before the client
// has reconnected, come on the same channel, each once and in order.
func TestSubscribeResumesAcrossARestart(t *testing.T) {
	t.Parallel()
	cfg := daemontest.Config(t)
	first := daemontest.Start(t, cfg, nil)
	addr := first.Addr()
	c, err := client.New(addr, first.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := c.Subscribe(ctx, vigil.EventFilter{Recipient: "amy"})
	if err != nil {
		t.Fatal(err)
	}
	note := func(title string) int64 {
		t.Helper()
		m, err := c.Note(ctx, vigil.NoteRequest{Recipient: "amy", Title: title})
		if err != nil {
			t.Fatalf("Note(%s): %v", title, err)
		}
		return m.Seq
	}
	nextSeq := func() int64 {
		t.Helper()
		for ev := range ch {
			if ev.Type == vigil.EventMessage {
				return ev.Seq
			}
		}
		t.Fatal("the event stream closed")
		return 0
	}
	want := []int64{note("before")}
	got := []int64{nextSeq()}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg.Listen = addr
	daemontest.Start(t, cfg, nil)
	want = append(want, note("after one"), note("after two"))
	got = append(got, nextSeq(), nextSeq())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message seqs across a restart (-want +got):\n%s", diff)
	}
	cancel()
	for range ch {
	}
}
