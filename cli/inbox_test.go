package cli

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestInboxAcksOnlyWhatItWrote holds that inbox marks messages read only
// once they are written out: with stdout failing (as > /dev/full does),
// in a table or as JSON, it exits 1 and the messages stay unread; written,
// they are read; --no-ack leaves them unread.
func TestInboxAcksOnlyWhatItWrote(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	env := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token(), "USER": "tester"}
	if r := d.vigil(t, "note", "--for", "amy", "deploy finished"); r.code != 0 {
		t.Fatalf("note: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"inbox", "--for", "amy"}, {"inbox", "--for", "amy", "--json"}} {
		r := cliRun{vars: env, stdout: failWriter{}}.run(t.Context(), args...)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "cannot write the messages, so they stay unread: write /dev/stdout: no space left on device") {
			t.Errorf("vigil %v with stdout failing: exit %d, stderr %q; want %d and why", args, r.code, r.stderr, ExitFailed)
		}
	}
	r := d.vigil(t, "inbox", "--for", "amy", "--no-ack")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Fatalf("inbox --no-ack after failed writes: exit %d, stdout %q; want the message, still unread", r.code, r.stdout)
	}
	r = d.vigil(t, "inbox", "--for", "amy")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Errorf("inbox after --no-ack: exit %d, stdout %q; want the message, still unread", r.code, r.stdout)
	}
	r = d.vigil(t, "inbox", "--for", "amy")
	if r.code != 0 || r.stdout != "No new messages for amy.\n" {
		t.Errorf("inbox after a written read: exit %d, stdout %q; want nothing new", r.code, r.stdout)
	}
}

// TestNoticeUnwrittenStaysUnread holds that notice marks messages read
// only once its block is written: with stdout failing it still exits 0
// (it never fails a turn), says why on stderr, and the next notice shows
// the messages.
func TestNoticeUnwrittenStaysUnread(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.vigil(t, "note", "--for", "amy", "deploy finished"); r.code != 0 {
		t.Fatalf("note: exit %d %s", r.code, r.stderr)
	}
	env := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token(), "USER": "tester"}
	r := cliRun{vars: env, stdout: failWriter{}}.run(t.Context(), "notice", "--for", "amy")
	if r.code != 0 || r.stderr != "vigil notice: cannot write the messages, so they stay unread: write /dev/stdout: no space left on device\n" {
		t.Errorf("notice with stdout failing: exit %d, stderr %q; want 0 and one line saying why", r.code, r.stderr)
	}
	r = d.vigil(t, "notice", "--for", "amy")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy finished") {
		t.Errorf("the next notice: exit %d, stdout %q; want the message, unread", r.code, r.stdout)
	}
	if r := d.vigil(t, "notice", "--for", "amy"); r.stdout != "" {
		t.Errorf("notice after a written one: %q, want nothing", r.stdout)
	}
}

// TestNoticeAckRetries holds that notice, once it has written its block,
// tries an ack that failed for now again, quietly, within noticeTimeout:
// the messages are printed once, marked read up to what was written, and
// nothing reaches stderr; past noticeTimeout it gives up, still quietly
// and exiting 0 (the next turn shows the messages again).
func TestNoticeAckRetries(t *testing.T) {
	t.Parallel()
	ack := `{"reader":"notice","seq":7}`
	t.Run("ack after an outage", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{answerCut, answerSlowDown, answerAcked}}
		r, clk := sd.vigil(t, "notice", "--for", "amy")
		if r.code != ExitOK || r.stderr != "" || strings.Count(r.stdout, "deploy finished") != 1 {
			t.Errorf("notice: exit %d, stdout %q, stderr %q; want 0, the message once, nothing on stderr", r.code, r.stdout, r.stderr)
		}
		if want := []string{ack, ack, ack}; !slices.Equal(sd.bodies(), want) {
			t.Errorf("acks = %v, want %v", sd.bodies(), want)
		}
		// 0.5 s of backoff, then the Retry-After, 1 s.
		if got, want := clk.pauses(), []time.Duration{500 * time.Millisecond, time.Second}; !slices.Equal(got, want) {
			t.Errorf("pauses = %v, want %v", got, want)
		}
	})
	t.Run("bound", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{answerStopping}}
		r, clk := sd.vigil(t, "notice", "--for", "amy")
		if r.code != ExitOK || r.stderr != "" {
			t.Errorf("notice: exit %d, stderr %q; want 0 and nothing on stderr", r.code, r.stderr)
		}
		if got := clk.elapsed(); got != noticeTimeout {
			t.Errorf("it gave up after %s, want %s", got, noticeTimeout)
		}
		if n := len(sd.bodies()); n < 2 {
			t.Errorf("%d acks, want it tried again", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{errorAnswer(400, vigil.CodeInvalidRequest, "bad seq", "")}}
		r, clk := sd.vigil(t, "notice", "--for", "amy")
		if r.code != ExitOK || r.stderr != "" || len(sd.bodies()) != 1 || len(clk.pauses()) > 0 {
			t.Errorf("notice: exit %d, stderr %q, acks %v, pauses %v; want 0, one ack, no pause", r.code, r.stderr, sd.bodies(), clk.pauses())
		}
	})
}

// messagesAnswer answers a page holding one note to amy, of seq seq.
func messagesAnswer(seq int64) answer {
	return func(w http.ResponseWriter) {
		page := vigil.MessagesPage{Messages: []*vigil.Message{{Seq: seq, ID: "m1", Recipient: "amy", Type: vigil.MessageNote,
			Text: "deploy finished", CreatedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	}
}

// TestInboxWaitRetries holds that inbox --wait rides out a daemon that
// cannot answer its long-poll as wait does: it pauses (the backoff, the
// Retry-After), says so once on stderr and polls again, until a message
// comes, which it writes and then acks up to the seq it wrote, once.
// --wait bounds the tries (exit 2 with the error, nothing acked), and
// without --wait inbox reads once and tries nothing again.
func TestInboxWaitRetries(t *testing.T) {
	t.Parallel()
	t.Run("message after an outage", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{
			get:  []answer{answerStopping, answerDropped, answerStarting, messagesAnswer(7)},
			post: []answer{func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }},
		}
		r, clk := sd.vigil(t, "inbox", "--for", "amy", "--wait", "1h")
		if r.code != ExitOK || !strings.Contains(r.stdout, "deploy finished") {
			t.Errorf("inbox --wait: exit %d, stdout %q, stderr %q; want 0 and the message", r.code, r.stdout, r.stderr)
		}
		if want := []string{"GET", "GET", "GET", "GET", "POST"}; !slices.Equal(sd.seen(), want) {
			t.Errorf("calls = %v, want %v", sd.seen(), want)
		}
		if want := []string{`{"reader":"cli","seq":7}`}; !slices.Equal(sd.bodies(), want) {
			t.Errorf("acks = %v, want %v", sd.bodies(), want)
		}
		checkRetried(t, r, clk, "vigil is shutting down; try again shortly", []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second})
	})
	t.Run("wait bounds the tries", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{answerStopping}}
		r, clk := sd.vigil(t, "inbox", "--for", "amy", "--wait", "10s")
		checkGaveUp(t, r, clk, 10*time.Second, "vigil is shutting down; try again shortly")
		if slices.Contains(sd.seen(), "POST") {
			t.Errorf("calls = %v, want no ack", sd.seen())
		}
	})
	t.Run("no wait", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{answerStarting, messagesAnswer(7)}}
		r, clk := sd.vigil(t, "inbox", "--for", "amy")
		checkNotRetried(t, r, clk, "vigil: vigil is starting; try again shortly\n")
	})
}

// answerAcked answers an ack: 204, nothing more.
func answerAcked(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// answerCut drops the connection before answering, as a daemon killed
// while it handles the call does. (answerDropped sends the headers first,
// which an ack, whose body nobody reads, takes for an answer.)
func answerCut(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// TestInboxAckRetries holds that inbox, once it has written the messages,
// rides out a daemon that cannot answer their ack as its reads do: it
// pauses (the backoff, the Retry-After), says so once on stderr, and acks
// again, the same seq, until the daemon answers; the messages are printed
// once and marked read up to what was written. It tries for up to
// inboxAckTimeout (exit 2, saying the messages will be shown again), and
// a refusal ends it at once.
func TestInboxAckRetries(t *testing.T) {
	t.Parallel()
	const shownAgain = "vigil: the messages were written, but marking them read failed: they will be shown again.\n"
	ackedOnce := func(t *testing.T, r result, sd *scriptedDaemon, acks int) {
		t.Helper()
		if n := strings.Count(r.stdout, "deploy finished"); n != 1 {
			t.Errorf("stdout = %q, want the message printed once", r.stdout)
		}
		if want := slices.Repeat([]string{`{"reader":"cli","seq":7}`}, acks); !slices.Equal(sd.bodies(), want) {
			t.Errorf("acks = %v, want %v", sd.bodies(), want)
		}
	}
	t.Run("ack after an outage", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{answerStopping, answerCut, answerSlowDown, answerAcked}}
		r, clk := sd.vigil(t, "inbox", "--for", "amy")
		if r.code != ExitOK {
			t.Errorf("inbox: exit %d, stderr %q; want 0", r.code, r.stderr)
		}
		ackedOnce(t, r, sd, 4)
		// 0.5 s, 1 s of backoff, then the Retry-After, 1 s.
		checkRetried(t, r, clk, "vigil is shutting down; try again shortly", []time.Duration{500 * time.Millisecond, time.Second, time.Second})
	})
	t.Run("daemon restarted", func(t *testing.T) {
		t.Parallel()
		// The daemon stops once it has answered the read: the ack finds
		// nobody listening (connection refused) until it listens again.
		sd := &scriptedDaemon{post: []answer{answerAcked}}
		ln := listenAt(t, "127.0.0.1:0", sd)
		addr := ln.Addr().String()
		sd.mu.Lock() // the server's goroutines read the script under it
		sd.get = []answer{func(w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			messagesAnswer(7)(w)
			ln.Close()
		}}
		sd.mu.Unlock()
		clk := newFakeClock()
		clk.onSleep = func(n int) {
			if n == 2 {
				listenAt(t, addr, sd)
			}
		}
		r := cliRun{vars: addrEnv(addr), clock: clk}.run(t.Context(), "inbox", "--for", "amy")
		if r.code != ExitOK {
			t.Errorf("inbox: exit %d, stderr %q; want 0", r.code, r.stderr)
		}
		ackedOnce(t, r, sd, 1)
		checkRetried(t, r, clk, "vigil daemon not reachable at "+addr+": ", []time.Duration{retryFirst, 2 * retryFirst})
	})
	t.Run("bound", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{answerStopping}}
		r, clk := sd.vigil(t, "inbox", "--for", "amy", "--wait", "1s")
		checkGaveUp(t, r, clk, inboxAckTimeout, "vigil is shutting down; try again shortly")
		if !strings.Contains(r.stderr, shownAgain) {
			t.Errorf("stderr = %q, want it to say the messages will be shown again", r.stderr)
		}
		if n := len(sd.bodies()); n < 2 {
			t.Errorf("%d acks, want it tried again", n)
		}
	})
	eachRefusal(t, func(t *testing.T, refused answer, said string) {
		sd := &scriptedDaemon{get: []answer{messagesAnswer(7)}, post: []answer{refused, answerAcked}}
		r, clk := sd.vigil(t, "inbox", "--for", "amy")
		checkNotRetried(t, r, clk, shownAgain+said)
		ackedOnce(t, r, sd, 1)
	})
}
