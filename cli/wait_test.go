package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

const scriptedID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// answer is what a scripted daemon answers one request with.
type answer func(w http.ResponseWriter)

// watchAnswer answers the watch in state st.
func watchAnswer(st vigil.State) answer {
	return func(w http.ResponseWriter) {
		wt := vigil.Watch{ID: scriptedID, Kind: "timer", Predicate: json.RawMessage(`{"at":"2030-01-01T00:00:00Z"}`), Recipient: "r", State: st}
		if st.Terminal() {
			wt.Outcome = &vigil.Outcome{State: st, Sentence: "The timer went off."}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(wt)
	}
}

// errorAnswer answers an API error, with Retry-After when retryAfter is
// not empty.
func errorAnswer(status int, code vigil.Code, msg, retryAfter string) answer {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
	}
}

// Answers of a daemon that stops, starts, and cuts a connection.
var (
	answerStopping = errorAnswer(503, vigil.CodeUnavailable, "vigil is shutting down; try again shortly", "")
	answerStarting = errorAnswer(503, vigil.CodeUnavailable, "vigil is starting; try again shortly", "3")
	answerSlowDown = errorAnswer(429, vigil.CodeRateLimited, "slow down", "1")
)

// eachRefusal runs check in a parallel subtest for each answer that
// trying again cannot change — unauthorized, forbidden, not_found,
// invalid_request, each with a Retry-After that must not make it a pause
// — with the line a command that gets it ends with on stderr.
func eachRefusal(t *testing.T, check func(t *testing.T, refused answer, said string)) {
	for _, a := range []struct {
		code   vigil.Code
		status int
	}{{vigil.CodeUnauthorized, 401}, {vigil.CodeForbidden, 403}, {vigil.CodeNotFound, 404}, {vigil.CodeInvalidRequest, 400}} {
		t.Run(string(a.code), func(t *testing.T) {
			t.Parallel()
			check(t, errorAnswer(a.status, a.code, "refused: "+string(a.code), "1"), "vigil: refused: "+string(a.code)+"\n")
		})
	}
}

// answerDropped starts an answer and drops the connection halfway, as a
// daemon killed mid-answer does (after the headers, so that no transport
// retries the request on its own).
func answerDropped(w http.ResponseWriter) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":")
	buf.Flush()
	conn.Close()
}

// scriptedDaemon answers POST /v1/watches ("POST"), GET
// /v1/watches/{id} ("GET") and its /wait ("WAIT") from a script per kind
// of call, the last answer of a script repeated, and records the order of
// the calls and the bodies of the POSTs. Any other POST is a "POST", and
// any other GET a "GET".
type scriptedDaemon struct {
	mu     sync.Mutex
	post   []answer
	get    []answer
	wait   []answer
	calls  []string
	posted []string
}

func (s *scriptedDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	name, script := "GET", &s.get
	switch {
	case r.Method == http.MethodPost:
		name, script = "POST", &s.post
		s.posted = append(s.posted, strings.TrimSpace(string(body)))
	case strings.HasSuffix(r.URL.Path, "/wait"):
		name, script = "WAIT", &s.wait
	}
	s.calls = append(s.calls, name)
	a := (*script)[0]
	if len(*script) > 1 {
		*script = (*script)[1:]
	}
	s.mu.Unlock()
	a(w)
}

func (s *scriptedDaemon) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func (s *scriptedDaemon) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// bodies returns the bodies of the POSTs so far.
func (s *scriptedDaemon) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posted)
}

func scriptedEnv(srv *httptest.Server) map[string]string { return addrEnv(srv.URL) }

// addrEnv is the environment of a command run against a fake daemon at
// addr.
func addrEnv(addr string) map[string]string {
	return map[string]string{"VIGIL_ADDR": addr, "VIGIL_TOKEN": "vgl_test", "USER": "tester"}
}

// vigil starts s and runs the command tree with args against it on a
// fake clock, which it returns.
func (s *scriptedDaemon) vigil(t *testing.T, args ...string) (result, *fakeClock) {
	t.Helper()
	srv := s.start(t)
	clk := newFakeClock()
	return cliRun{vars: scriptedEnv(srv), clock: clk}.run(t.Context(), args...), clk
}

// TestWaitRetriesWhileDaemonCannotAnswer holds that wait rides out a
// daemon that stops (its long-poll ended with 503 unavailable), starts
// (503 with Retry-After), asks to slow down (429 rate_limited) and cuts a
// long-poll's connection: it pauses — the Retry-After when given, else a
// backoff doubling from 0.5 s — and reads the watch again before
// long-polling, so a settlement in the gap is reported (exit 0) without
// another long-poll. It says once on stderr that it is trying again.
func TestWaitRetriesWhileDaemonCannotAnswer(t *testing.T) {
	t.Parallel()
	sd := &scriptedDaemon{
		get:  []answer{watchAnswer(vigil.StatePending), answerStarting, answerSlowDown, watchAnswer(vigil.StatePending), watchAnswer(vigil.StateFired)},
		wait: []answer{answerStopping, answerDropped},
	}
	r, clk := sd.vigil(t, "wait", scriptedID)
	if r.code != ExitOK || r.stdout != "fired: The timer went off.\n" {
		t.Errorf("wait: exit %d, stdout %q, stderr %q; want 0 and the fired line", r.code, r.stdout, r.stderr)
	}
	if want := []string{"GET", "WAIT", "GET", "GET", "GET", "WAIT", "GET"}; !slices.Equal(sd.seen(), want) {
		t.Errorf("calls = %v, want %v", sd.seen(), want)
	}
	// 0.5 s backoff; the Retry-Afters, 3 s and 1 s; then the backoff
	// goes on (the outage lasts until a long-poll answers): 4 s.
	checkRetried(t, r, clk, "vigil is shutting down; try again shortly",
		[]time.Duration{500 * time.Millisecond, 3 * time.Second, time.Second, 4 * time.Second})
}

// TestWaitRetriesFirstRead holds that wait rides out a daemon that
// cannot answer its first read of the watch, as it does while waiting:
// wait ID issued while the daemon restarts pauses (the backoff, the
// Retry-After), reads again, and waits on for the settlement (exit 0),
// saying once on stderr that it tries again; the outage goes on into the
// long-poll that fails after it. --timeout bounds those tries too (exit 2
// with the error when the daemon never answered), and --timeout 0s makes
// none.
func TestWaitRetriesFirstRead(t *testing.T) {
	t.Parallel()
	t.Run("settles", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{
			get:  []answer{answerStopping, answerStarting, watchAnswer(vigil.StatePending), watchAnswer(vigil.StateFired)},
			wait: []answer{answerStopping},
		}
		r, clk := sd.vigil(t, "wait", scriptedID)
		if r.code != ExitOK || r.stdout != "fired: The timer went off.\n" {
			t.Errorf("wait: exit %d, stdout %q, stderr %q; want 0 and the fired line", r.code, r.stdout, r.stderr)
		}
		if want := []string{"GET", "GET", "GET", "WAIT", "GET"}; !slices.Equal(sd.seen(), want) {
			t.Errorf("calls = %v, want %v", sd.seen(), want)
		}
		checkRetried(t, r, clk, "vigil is shutting down; try again shortly", []time.Duration{500 * time.Millisecond, 3 * time.Second, 2 * time.Second})
	})
	t.Run("timeout, daemon down", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{answerStopping}}
		r, clk := sd.vigil(t, "wait", scriptedID, "--timeout", "10s")
		checkGaveUp(t, r, clk, 10*time.Second, "vigil is shutting down; try again shortly")
	})
	t.Run("timeout 0s", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{answerStarting, watchAnswer(vigil.StateFired)}}
		r, clk := sd.vigil(t, "wait", scriptedID, "--timeout", "0s")
		checkNotRetried(t, r, clk, "vigil: vigil is starting; try again shortly\n")
	})
}

// TestAddWaitRetries holds the same for add --wait, which waits with the
// same loop once the watch is registered.
func TestAddWaitRetries(t *testing.T) {
	t.Parallel()
	sd := &scriptedDaemon{
		post: []answer{watchAnswer(vigil.StatePending)},
		get:  []answer{watchAnswer(vigil.StateFired)},
		wait: []answer{answerStopping},
	}
	r, clk := sd.vigil(t, "add", "timer", "1h", "-q", "--wait")
	if r.code != ExitOK || !strings.HasSuffix(r.stdout, "fired: The timer went off.\n") {
		t.Errorf("add --wait: exit %d, stdout %q, stderr %q; want 0 and the fired line", r.code, r.stdout, r.stderr)
	}
	if want := []string{"POST", "WAIT", "GET"}; !slices.Equal(sd.seen(), want) {
		t.Errorf("calls = %v, want %v", sd.seen(), want)
	}
	checkRetried(t, r, clk, "vigil is shutting down; try again shortly", []time.Duration{retryFirst})
}

// TestWaitRetryBounds holds how long wait tries: the backoff doubles up
// to 5 s and it goes on until interrupted (exit 130); with --timeout, it
// stops there: exit 8 if the watch was last read pending at the
// deadline, exit 2 with the error if the daemon still did not answer.
func TestWaitRetryBounds(t *testing.T) {
	t.Parallel()
	t.Run("until interrupted", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{watchAnswer(vigil.StatePending), answerStopping}, wait: []answer{answerStopping}}
		srv := sd.start(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		clk := newFakeClock()
		clk.onSleep = func(n int) {
			if n == 7 {
				cancel() // Ctrl-C
			}
		}
		r := cliRun{vars: scriptedEnv(srv), clock: clk}.run(ctx, "wait", scriptedID)
		if r.code != ExitInterrupted {
			t.Errorf("wait interrupted while retrying: exit %d, stderr %q; want %d", r.code, r.stderr, ExitInterrupted)
		}
		checkRetried(t, r, clk, "vigil is shutting down; try again shortly",
			[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second})
	})
	t.Run("timeout, read pending", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{watchAnswer(vigil.StatePending)}, wait: []answer{answerStopping}}
		r, clk := sd.vigil(t, "wait", scriptedID, "--timeout", "10s")
		if r.code != ExitPending || !strings.HasPrefix(r.stdout, "pending: ") {
			t.Errorf("wait --timeout 10s, long-polls failing: exit %d, stdout %q; want %d, pending", r.code, r.stdout, ExitPending)
		}
		// The last pause is what was left of the 10 s.
		checkRetried(t, r, clk, "vigil is shutting down; try again shortly",
			[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 2500 * time.Millisecond})
	})
	t.Run("timeout, daemon down", func(t *testing.T) {
		t.Parallel()
		sd := &scriptedDaemon{get: []answer{watchAnswer(vigil.StatePending), answerStopping}, wait: []answer{answerStopping}}
		r, clk := sd.vigil(t, "wait", scriptedID, "--timeout", "10s")
		checkGaveUp(t, r, clk, 10*time.Second, "vigil is shutting down; try again shortly")
	})
}

// TestWaitDoesNotRetryRefusals holds that a refusal that retrying cannot
// change ends wait at once, exit 2, without a pause.
func TestWaitDoesNotRetryRefusals(t *testing.T) {
	t.Parallel()
	eachRefusal(t, func(t *testing.T, refused answer, said string) {
		sd := &scriptedDaemon{get: []answer{watchAnswer(vigil.StatePending)}, wait: []answer{refused}}
		r, clk := sd.vigil(t, "wait", scriptedID)
		checkNotRetried(t, r, clk, said)
	})
}

// TestWaitTimeoutZeroLooksOnce holds that wait --timeout 0s reads the
// watch once and reports it: a pending watch exits 8 at once, without a
// long-poll, and a settled one exits for its state.
func TestWaitTimeoutZeroLooksOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state vigil.State
		code  int
	}{{vigil.StatePending, ExitPending}, {vigil.StateUnwatchable, ExitPending}, {vigil.StateFired, ExitOK}} {
		t.Run(string(tc.state), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// A long-poll is the failure: it would go on for ever.
			sd := &scriptedDaemon{get: []answer{watchAnswer(tc.state)}, wait: []answer{func(w http.ResponseWriter) {
				cancel()
				watchAnswer(tc.state)(w)
			}}}
			srv := sd.start(t)
			r := cliRun{vars: scriptedEnv(srv), clock: newFakeClock()}.run(ctx, "wait", scriptedID, "--timeout", "0s")
			if r.code != tc.code || !strings.HasPrefix(r.stdout, string(tc.state)+": ") {
				t.Errorf("wait --timeout 0s on a %s watch: exit %d, stdout %q, stderr %q; want %d", tc.state, r.code, r.stdout, r.stderr, tc.code)
			}
			if want := []string{"GET"}; !slices.Equal(sd.seen(), want) {
				t.Errorf("calls = %v, want %v", sd.seen(), want)
			}
		})
	}
}

// TestAddWaitRegistrationErrorIsNotAnOutcome holds that add --wait, whose
// exit codes are wait's (1: the watch failed), exits 2 when the daemon
// answers the registration itself with an internal error: no watch was
// made, and exit 1 would tell a script the watch it waited on failed.
func TestAddWaitRegistrationErrorIsNotAnOutcome(t *testing.T) {
	t.Parallel()
	sd := &scriptedDaemon{post: []answer{errorAnswer(500, vigil.CodeInternal, "the database is corrupt", "")}}
	r, _ := sd.vigil(t, "add", "timer", "1h", "--wait")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "the database is corrupt") {
		t.Errorf("add --wait, registration answered 500: exit %d, stderr %q; want 2 (not 1, the failed outcome) and the error", r.code, r.stderr)
	}
	// Without --wait, an internal error is exit 1 as for every command.
	r, _ = sd.vigil(t, "add", "timer", "1h")
	if r.code != ExitFailed {
		t.Errorf("add, registration answered 500: exit %d, want 1", r.code)
	}
}

// TestWaitOnUnwatchableWaitsForItsSettlement holds that wait on a watch
// the daemon shows unwatchable (a kind it has no watcher for) waits for it
// to settle, as on a pending one: it has not settled, and expires at its
// deadline. It exited 4 at once, as if the watch had been cancelled.
func TestWaitOnUnwatchableWaitsForItsSettlement(t *testing.T) {
	t.Parallel()
	sd := &scriptedDaemon{get: []answer{watchAnswer(vigil.StateUnwatchable)},
		wait: []answer{watchAnswer(vigil.StateUnwatchable), watchAnswer(vigil.StateExpired)}}
	r, _ := sd.vigil(t, "wait", scriptedID)
	if r.code != ExitExpired || !strings.HasPrefix(r.stdout, "expired: ") {
		t.Errorf("wait on an unwatchable watch that then expires: exit %d, stdout %q, stderr %q; want %d, expired", r.code, r.stdout, r.stderr, ExitExpired)
	}
	if want := []string{"GET", "WAIT", "WAIT"}; !slices.Equal(sd.seen(), want) {
		t.Errorf("calls = %v, want %v", sd.seen(), want)
	}
}
