package deliver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

// TestTwoCommands: a watch may carry an on-done and an on-fail command
// (an array whose outcome classes do not overlap); one command stays an
// object; overlapping classes, more than two, or none are refused.
func TestTwoCommands(t *testing.T) {
	t.Parallel()
	p := deliver.Policy{AllowExec: true}
	for _, tt := range []struct{ in, want string }{
		{`{"command":[{"shell":"ok.sh","on":"done"},{"shell":"page.sh","on":"fail"}]}`,
			`{"command":[{"on":"done","shell":"ok.sh","timeout":"1m"},{"on":"fail","shell":"page.sh","timeout":"1m"}]}`},
		{`{"command":[{"shell":"ok.sh","on":"done"}]}`, `{"command":{"on":"done","shell":"ok.sh","timeout":"1m"}}`},
	} {
		got, err := p.Canonicalize(json.RawMessage(tt.in), true)
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{
		`{"command":[{"shell":"a","on":"any"},{"shell":"b","on":"done"}]}`,
		`{"command":[{"shell":"a","on":"fail"},{"shell":"b","on":"fail"}]}`,
		`{"command":[{"shell":"a"},{"shell":"b","on":"fail"}]}`,
		`{"command":[{"shell":"a","on":"done"},{"shell":"b","on":"fail"},{"shell":"c","on":"done"}]}`,
		`{"command":[]}`,
	} {
		_, err := p.Canonicalize(json.RawMessage(in), true)
		if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || !strings.HasPrefix(vigil.ErrorField(err), "deliver.command") {
			t.Errorf("Canonicalize(%s) = %v (field %q); want invalid_request on deliver.command", in, err, vigil.ErrorField(err))
		}
	}
}

// TestCommandRunsFor: "done" runs when the watch fired, "fail" when it
// failed, errored or expired (a timeout is a failure to whoever waits),
// "any" on every outcome; with two commands, the one whose class the
// outcome is in.
func TestCommandRunsFor(t *testing.T) {
	t.Parallel()
	o, err := deliver.ParseOptions(json.RawMessage(`{"command":[{"shell":"ok.sh","on":"done"},{"shell":"page.sh","on":"fail"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[vigil.State]string{
		vigil.StateFired: "ok.sh", vigil.StateFailed: "page.sh", vigil.StateErrored: "page.sh", vigil.StateExpired: "page.sh", vigil.StateCancelled: "",
	} {
		got := ""
		if c := o.Command.For(s); c != nil {
			got = c.Shell
		}
		if got != want {
			t.Errorf("For(%s) = %q, want %q", s, got, want)
		}
	}
	any, _ := deliver.ParseOptions(json.RawMessage(`{"command":{"shell":"log.sh","on":"any"}}`))
	for _, s := range []vigil.State{vigil.StateFired, vigil.StateFailed, vigil.StateErrored, vigil.StateExpired} {
		if c := any.Command.For(s); c == nil || c.Shell != "log.sh" {
			t.Errorf("an any command for %s: %+v, want it to run", s, c)
		}
	}
}

// recordingChannel records which command each delivery would run.
type recordingChannel struct {
	mu  sync.Mutex
	ran []string
}

func (c *recordingChannel) Send(_ context.Context, d *deliver.Delivery) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cmd := d.Options.Command.For(d.Watch.State); cmd != nil {
		c.ran = append(c.ran, string(d.Watch.State)+":"+cmd.Shell)
	}
	return false, nil
}

// TestOnFailRunsOnExpiry: the dispatcher hands an expired watch to its
// on-fail command, and a fired one to its on-done command.
func TestOnFailRunsOnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingChannel{}
		r := newRig(t, func(int) (int, bool, bool) { return http.StatusOK, false, false }, map[string]deliver.Channel{deliver.ChannelCommand: rec})
		const opts = `{"command":[{"shell":"ok.sh","on":"done"},{"shell":"page.sh","on":"fail"}]}`
		for id, s := range map[string]vigil.State{"expired": vigil.StateExpired, "fired": vigil.StateFired} {
			w, m := settled(t, r.st, id, opts, s)
			r.d.Deliver(w, m)
		}
		synctest.Wait()
		rec.mu.Lock()
		got := slices.Sorted(slices.Values(rec.ran))
		rec.mu.Unlock()
		if want := []string{"expired:page.sh", "fired:ok.sh"}; !slices.Equal(got, want) {
			t.Errorf("ran %v, want %v", got, want)
		}
		if rc := r.receipt(t, "expired", deliver.ChannelCommand); rc.Status != vigil.ReceiptDelivered {
			t.Errorf("the expired watch's command receipt = %+v, want delivered", rc)
		}
	})
}
