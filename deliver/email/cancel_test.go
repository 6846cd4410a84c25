package email_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
)

// An attempt whose context ends (the dispatcher cutting the attempts in
// flight past the stop grace) ends then, as a webhook's does, not at the end
// of the channel's own timeout: a server that accepted the connection and
// answers nothing must not hold the shutdown (and, on a replica, the
// shards' hand-over) for the whole SMTP timeout.
func TestSendEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- c // held open; never greets
	}()
	ch := email.New(email.Config{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Timeout: time.Hour})
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindHTTP, Recipient: "a", State: vigil.StateFired, Outcome: &vigil.Outcome{Sentence: "x"}}
	d := &deliver.Delivery{Watch: w, MessageID: "m1", Options: deliver.Options{Email: &deliver.EmailOptions{To: "ops@example.com"}}, Attempt: 1, Now: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		retry bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		retry, err := ch.Send(ctx, d)
		done <- answer{retry, err}
	}()
	c := <-accepted
	defer c.Close()
	cancel()
	select {
	case a := <-done:
		if a.err == nil || !a.retry {
			t.Errorf("Send = %v, %v; want a failure that may be tried again (nothing was handed over)", a.retry, a.err)
		}
	case <-time.After(time.Minute):
		// Not a timing claim: without the fix Send waits for its hour.
		t.Fatal("Send still runs a minute after its context ended")
	}
}
