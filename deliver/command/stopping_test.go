package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
)

// TestNotStartedOnceStopping: a command whose attempt reaches the channel
// once the daemon is stopping (Delivery.Stopping closed), or whose context
// has ended (the grace cut), starts nothing and says it may be tried
// again, so its receipt is retrying and the next start runs it. It was
// started, to be cut by the grace's end (or, its context ended, not
// started at all) and answered as a run that may have done its work: the
// receipt stayed sending, unknown at the next start, and the command never
// ran.
func TestNotStartedOnceStopping(t *testing.T) {
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "ran")
	opts := `{"command":{"shell":` + strconv.Quote("touch "+ran) + `,"timeout":"10s"}}`
	ch := command.New(command.Config{})

	stopping := make(chan struct{})
	close(stopping)
	d := delivery(t, opts, vigil.StateFired)
	d.Stopping = stopping
	retry, err := ch.Send(t.Context(), d)
	if !retry || !errors.Is(err, deliver.ErrStopping) {
		t.Errorf("Send once stopping = %v, %v; want retry and ErrStopping", retry, err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	retry, err = ch.Send(ctx, delivery(t, opts, vigil.StateFired))
	if !retry || err == nil {
		t.Errorf("Send with its context ended = %v, %v; want retry", retry, err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}

	// Resume runs as a command does.
	r := command.NewResume(command.Config{})
	d = delivery(t, `{"resume":{"argv":["sh","-c",`+strconv.Quote("touch "+ran)+`],"timeout":"10s"}}`, vigil.StateFired)
	d.Stopping, d.Waited = stopping, true
	if retry, err := r.Send(t.Context(), d); !retry || !errors.Is(err, deliver.ErrStopping) {
		t.Errorf("resume Send once stopping = %v, %v; want retry and ErrStopping", retry, err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the resume ran")
	}
}
