package mcpserver_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// TestChannelBurstWindow checks the burst bound on the fake clock of a
// synctest bubble: 30 messages waiting when the session starts become 9
// events and one summary of 21, all at once; what lands while the window
// is full waits for it to pass, then goes one by one.
func TestChannelBurstWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
		if err := e.Prime(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		engineDone := make(chan error, 1)
		go func() { engineDone <- e.Run(ctx) }()
		note := func(title string) int64 {
			t.Helper()
			m, err := e.Note(ctx, vigil.NoteRequest{Recipient: "r", Title: title})
			if err != nil {
				t.Fatal(err)
			}
			return m.Seq
		}
		var burst []int64
		for i := range 30 {
			burst = append(burst, note(fmt.Sprintf("burst %d", i)))
		}

		srvEnd, cliEnd := net.Pipe()
		runDone := make(chan error, 1)
		go func() {
			runDone <- mcpserver.Run(ctx, e, &mcpserver.Options{DefaultRecipient: "r", Channel: true}, &mcp.IOTransport{Reader: srvEnd, Writer: srvEnd})
		}()
		c := newRawClient(t, cliEnd, cliEnd)
		c.initialize()
		start := time.Now()
		for i := range 9 {
			if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(burst[i], 10) {
				t.Fatalf("event %d = %+v, want message %d", i, ev, burst[i])
			}
		}
		if ev := c.next(); ev.Meta["event"] != "summary" || ev.Meta["count"] != "21" {
			t.Fatalf("10th event = %+v, want a summary of 21", ev)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the burst took %s of the fake clock, want none", d)
		}

		// The window is full: these wait for it to pass.
		more := []int64{note("late 1"), note("late 2"), note("late 3")}
		synctest.Wait()
		if len(c.msgs) != 0 || len(c.held) != 0 {
			t.Fatalf("%d messages written while the window was full", len(c.msgs)+len(c.held))
		}
		for _, want := range more {
			if ev := c.next(); ev.Meta["event"] != "message" || ev.Meta["seq"] != strconv.FormatInt(want, 10) {
				t.Fatalf("event = %+v, want message %d", ev, want)
			}
		}
		if d := time.Since(start); d != mcpserver.DefaultChannelWindow {
			t.Errorf("the late messages went out after %s, want the window, %s", d, mcpserver.DefaultChannelWindow)
		}

		cliEnd.Close()
		if err := <-runDone; err != nil {
			t.Logf("Run = %v", err)
		}
		page, err := e.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: mcpserver.DefaultReader})
		if err != nil || len(page.Messages) != 0 {
			t.Errorf("unread after the pushes: %d, %v", len(page.Messages), err)
		}
		cancel()
		<-engineDone
	})
}
