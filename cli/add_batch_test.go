package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/internal/wire"
)

// TestAddFromFile registers a JSON Lines file against a real daemon: each
// line answered in its place, 1 000 per call, and a file with a bad line
// sends nothing.
func TestAddFromFile(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	due := time.Now().Add(time.Hour)
	line := func(i int, extra string) string {
		at := vigil.FormatTime(due.Add(time.Duration(i) * time.Second))
		return fmt.Sprintf(`{"kind":"timer","predicate":{"at":%q},"note":"n%d"%s}`, at, i, extra)
	}
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	small := write("small.jsonl", line(1, ""), "", line(1, `,"recipient":"zed"`), `{"kind":"nope","recipient":"zed"}`)
	r := d.vigil(t, "add", "--from-file", small, "--for", "amy")
	if r.code != ExitUsage {
		t.Errorf("exit = %d, want %d (one line was refused)", r.code, ExitUsage)
	}
	for _, want := range []string{"line 1: Watching", "for amy", "line 3: Watching", "for zed", "line 4: refused (unknown_kind)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "1 of 3 registrations were refused") {
		t.Errorf("stderr = %q, want the count of refusals", r.stderr)
	}
	// Twice the same file: the same watches, existing.
	r = d.vigil(t, "add", "--from-file", small, "--for", "amy", "--json")
	if n := strings.Count(r.stdout, `"status":"existing"`); n != 2 {
		t.Errorf("again: %d existing, want 2:\n%s", n, r.stdout)
	}

	// 2 500 lines: three calls.
	var lines []string
	for i := range 2500 {
		lines = append(lines, line(i, fmt.Sprintf(`,"recipient":"bulk%d"`, i%3)))
	}
	r = d.vigil(t, "add", "--from-file", write("bulk.jsonl", lines...), "-q")
	if r.code != 0 {
		t.Fatalf("bulk: exit %d: %s", r.code, r.stderr)
	}
	if n := len(strings.Fields(r.stdout)); n != 2500 {
		t.Errorf("bulk printed %d ids, want 2500", n)
	}
	r = d.vigil(t, "list", "--for", "bulk0", "--limit", "1000", "--json")
	if n := strings.Count(r.stdout, `"recipient": "bulk0"`) + strings.Count(r.stdout, `"recipient":"bulk0"`); n != 834 {
		t.Errorf("list --for bulk0 listed %d watches, want 834 (exit %d %s)", n, r.code, r.stderr)
	}

	// A bad line anywhere sends nothing.
	bad := write("bad.jsonl", line(9, `,"recipient":"bad"`), `[1]`)
	r = d.vigil(t, "add", "--from-file", bad)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "line 2") {
		t.Errorf("bad file: exit %d, stderr %q; want a usage error naming line 2", r.code, r.stderr)
	}
	r = d.vigil(t, "list", "--for", "bad", "--json")
	if strings.Contains(r.stdout, `"bad"`) {
		t.Errorf("bad file registered %q, want nothing", r.stdout)
	}
	if r := d.vigil(t, "add", "timer", "--from-file", small); r.code != ExitUsage {
		t.Errorf("--from-file with a kind: exit %d, want %d", r.code, ExitUsage)
	}
}

// TestAddFromFileWithinBodyLimit holds that --from-file keeps each call's
// body within the daemon's bound: 1 000 valid lines of 1.3 KB (1.25 MB in
// all) are registered, in more than one call, and a line too large for
// any call is refused in its place, the others registered around it.
func TestAddFromFileWithinBodyLimit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	note := strings.Repeat("x", 1200)
	var lines []string
	for i := range 1000 {
		lines = append(lines, fmt.Sprintf(`{"kind":"timer","predicate":{"in":"%dm"},"note":%q}`, i+1, note))
	}
	// Line 501: within a line's bound, but over a call's once the
	// recipient is added.
	huge := fmt.Sprintf(`{"kind":"timer","predicate":{"in":"1h"},"note":%q}`, strings.Repeat("y", maxLineBytes-60))
	lines = slices.Insert(lines, 500, huge)
	p := filepath.Join(t.TempDir(), "w.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := d.vigil(t, "add", "--from-file", p, "--for", "amy")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "1 of 1001 registrations were refused") {
		t.Errorf("exit %d, stderr %q; want %d, one refused", r.code, r.stderr, ExitUsage)
	}
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(out) != 1001 {
		t.Fatalf("printed %d lines, want 1001:\n%.2000s", len(out), r.stdout)
	}
	for i, l := range out {
		want := fmt.Sprintf("line %d: Watching ", i+1)
		if i == 500 {
			want = fmt.Sprintf("line 501: refused (payload_too_large): the registration is %d bytes as JSON, more than the %d one request may carry", len(huge)+len(`,"recipient":"amy"`), maxItemBytes)
		}
		if !strings.HasPrefix(l, want) {
			t.Errorf("output line %d = %.120q, want it to start %q", i+1, l, want)
		}
	}
	r = d.vigil(t, "list", "--for", "amy", "--limit", "1000", "--json")
	if n := strings.Count(r.stdout, `"recipient": "amy"`); n != 1000 {
		t.Errorf("list --for amy: %d watches, want 1000 (exit %d %s)", n, r.code, r.stderr)
	}
}

// TestNextBatch holds where a call ends: at the most registrations asked
// for, or before the registration whose comma and bytes would take the
// body past the bound, a body exactly at the bound included; a
// registration too large for any call is passed over within the range.
func TestNextBatch(t *testing.T) {
	t.Parallel()
	sized := func(sizes ...int) []fromFileLine {
		ls := make([]fromFileLine, len(sizes))
		for i, s := range sizes {
			ls[i] = fromFileLine{line: i + 1, size: s}
		}
		return ls
	}
	half := (maxItemBytes - 1) / 2 // two of them and a comma fill a body
	for _, tc := range []struct {
		name  string
		lines []fromFileLine
		start int
		most  int
		want  int
	}{
		{"by count", sized(10, 10, 10, 10, 10), 0, 3, 3},
		{"the rest", sized(10, 10, 10, 10, 10), 3, 3, 5},
		{"exactly full", sized(half, maxItemBytes-1-half, 1), 0, 1000, 2},
		{"one byte over", sized(half, maxItemBytes-half, 1), 0, 1000, 1},
		{"one item fills it", sized(maxItemBytes, 1), 0, 1000, 1},
		{"too large passed over", sized(10, maxItemBytes+1, 10), 0, 1000, 3},
		{"too large not counted", sized(10, maxItemBytes+1, 10, 10), 0, 2, 3},
		{"only too large", sized(maxItemBytes + 1), 0, 1000, 1},
	} {
		if got := nextBatch(tc.lines, tc.start, tc.most); got != tc.want {
			t.Errorf("%s: nextBatch(…, %d, %d) = %d, want %d", tc.name, tc.start, tc.most, got, tc.want)
		}
	}
}

// batchDaemon answers POST /v1/watches/batch: refuse, when set, may
// refuse a call whole (the call's number from 1, its item count); any
// other call is registered whole. It records each call's body.
type batchDaemon struct {
	refuse func(call, items int) answer
	mu     sync.Mutex
	bodies [][]byte
}

func (b *batchDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Watches []vigil.RegisterRequest `json:"watches"`
	}
	if r.URL.Path != "/v1/watches/batch" || json.Unmarshal(body, &req) != nil {
		errorAnswer(400, vigil.CodeInvalidRequest, "not a batch", "")(w)
		return
	}
	b.mu.Lock()
	b.bodies = append(b.bodies, body)
	call := len(b.bodies)
	b.mu.Unlock()
	if b.refuse != nil {
		if a := b.refuse(call, len(req.Watches)); a != nil {
			a(w)
			return
		}
	}
	resp := wire.BatchResponse{Results: make([]wire.BatchItem, len(req.Watches))}
	for i, rr := range req.Watches {
		resp.Results[i] = wire.BatchItem{Status: vigil.BatchCreated, Watch: &vigil.Watch{ID: fmt.Sprintf("W%d-%d", call, i),
			Kind: rr.Kind, Predicate: rr.Predicate, Recipient: rr.Recipient, State: vigil.StatePending}}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// calls returns the bodies of the calls so far.
func (b *batchDaemon) calls() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.bodies)
}

// writeLines writes lines as a JSON Lines file and returns its path.
func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAddFromFileBodyAtBound holds that the size --from-file reckons for
// a call is the size of the body the client sends: two registrations
// that fill a body to exactly the daemon's bound go in one call of that
// size, and the next in another.
func TestAddFromFileBodyAtBound(t *testing.T) {
	t.Parallel()
	bd := &batchDaemon{}
	srv := httptest.NewServer(bd)
	defer srv.Close()
	// Written as the client encodes them (fields in order, compact), so
	// that each line's length is its size in the body.
	line := func(size int) string {
		l := `{"kind":"timer","predicate":{"in":"1h"},"recipient":"amy","note":""}`
		return l[:len(l)-2] + strings.Repeat("n", size-len(l)) + `"}`
	}
	first := (maxItemBytes - 1) / 2
	lines := []string{line(first), line(maxItemBytes - 1 - first), line(100)}
	r := runCLI(t, scriptedEnv(srv), "add", "--from-file", writeLines(t, lines), "-q")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var sizes []int
	for _, b := range bd.calls() {
		sizes = append(sizes, len(b))
	}
	if want := []int{wire.DefaultMaxBodyBytes, batchEnvelopeBytes + 100}; !slices.Equal(sizes, want) {
		t.Errorf("bodies of %v bytes, want %v", sizes, want)
	}
}

// addTimers starts b and runs add --from-file on n lines of timers for
// amy (-q) against it on a fake clock, which it returns.
func (b *batchDaemon) addTimers(t *testing.T, n int) (result, *fakeClock) {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	clk := newFakeClock()
	return cliRun{vars: scriptedEnv(srv), clock: clk}.run(t.Context(), "add", "--from-file", writeLines(t, timerLines(n)), "--for", "amy", "-q"), clk
}

// timerLines returns n registration lines of timers.
func timerLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"kind":"timer","predicate":{"in":"%dm"}}`, i+1)
	}
	return lines
}

// TestAddFromFileScopedToken holds that --from-file works with a scoped
// token, which docs/agents.md gives each agent: a call larger than the
// token's burst (100) is refused whole with no wait, and --from-file
// halves it until it passes. All 250 lines are registered, once each.
func TestAddFromFileScopedToken(t *testing.T) {
	t.Parallel()
	cfg := daemontest.Config(t)
	// The default burst; a rate at which the bucket refills between two
	// calls, so that no call waits.
	cfg.RegisterRate = 1_000_000
	d := daemontest.Start(t, cfg, nil)
	admin, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	tok, err := admin.CreateToken(t.Context(), vigil.TokenCreateRequest{Recipients: []string{"amy"}})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": tok.Secret, "USER": "tester"}
	r := cliRun{vars: env, clock: newFakeClock()}.run(t.Context(), "add", "--from-file", writeLines(t, timerLines(250)), "--for", "amy", "-q")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing on stderr", r.code, r.stderr)
	}
	if n := len(strings.Fields(r.stdout)); n != 250 {
		t.Errorf("printed %d ids, want 250", n)
	}
	page, err := admin.Watches(t.Context(), vigil.ListRequest{Recipient: "amy", Limit: 1000})
	if err != nil || len(page.Watches) != 250 {
		t.Errorf("amy has %d watches (%v), want 250", len(page.Watches), err)
	}
}

// burstRefusal is the daemon's answer to a batch larger than the token's
// burst: rate_limited with no Retry-After, as no wait lets it pass.
func burstRefusal(items int) answer {
	return errorAnswer(429, vigil.CodeRateLimited, fmt.Sprintf("this token may register at most 100 watches at once, and this batch holds %d: split it", items), "")
}

// TestAddFromFileRateLimited holds how --from-file meets a token's rate
// limit: a call larger than the burst is halved (and the calls after it
// keep the smaller size); a call refused for now is sent again, the same
// registrations, after the Retry-After; nothing is said on stderr.
func TestAddFromFileRateLimited(t *testing.T) {
	t.Parallel()
	bd := &batchDaemon{refuse: func(call, items int) answer {
		switch {
		case items > 100:
			return burstRefusal(items)
		case call == 3:
			return errorAnswer(429, vigil.CodeRateLimited, "this token registers too fast; try again in 7 s", "7")
		}
		return nil
	}}
	r, clk := bd.addTimers(t, 150)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing on stderr", r.code, r.stderr)
	}
	var ids []string
	for i := range 75 {
		ids = append(ids, fmt.Sprintf("W2-%d", i))
	}
	for i := range 75 {
		ids = append(ids, fmt.Sprintf("W4-%d", i))
	}
	if got := strings.Fields(r.stdout); !slices.Equal(got, ids) {
		t.Errorf("printed %d ids, want the 75 of call 2 then the 75 of call 4:\n%s", len(got), r.stdout)
	}
	calls := bd.calls()
	var sizes []int
	for _, b := range calls {
		sizes = append(sizes, strings.Count(string(b), `"kind"`))
	}
	if want := []int{150, 75, 75, 75}; !slices.Equal(sizes, want) {
		t.Fatalf("calls of %v registrations, want %v", sizes, want)
	}
	if string(calls[2]) != string(calls[3]) {
		t.Error("the call sent again after Retry-After differs from the one refused")
	}
	checkPauses(t, clk, []time.Duration{7 * time.Second})
}

// TestAddFromFileRateLimitBounds holds the bounds of those retries: a
// Retry-After is waited at most a minute, a call is sent at most 11 times
// in a row, and then --from-file gives up (exit 2), saying which lines
// were sent; a call of one registration refused with no wait is not
// retried.
func TestAddFromFileRateLimitBounds(t *testing.T) {
	t.Parallel()
	t.Run("retry-after", func(t *testing.T) {
		t.Parallel()
		bd := &batchDaemon{refuse: func(call, items int) answer {
			switch {
			case items > 100:
				return burstRefusal(items)
			case call > 2:
				return errorAnswer(429, vigil.CodeRateLimited, "this token registers too fast; try again in 600 s", "600")
			}
			return nil
		}}
		r, clk := bd.addTimers(t, 150)
		want := "The registrations of lines 1 to 75 were sent; those from line 76 on were not.\nvigil: this token registers too fast; try again in 600 s\n"
		if r.code != ExitUsage || r.stderr != want {
			t.Errorf("exit %d, stderr %q; want %d, %q", r.code, r.stderr, ExitUsage, want)
		}
		if n := len(bd.calls()); n != 2+1+maxRateTries {
			t.Errorf("%d calls, want %d", n, 2+1+maxRateTries)
		}
		checkPauses(t, clk, slices.Repeat([]time.Duration{time.Minute}, maxRateTries))
	})
	t.Run("one registration, no wait", func(t *testing.T) {
		t.Parallel()
		bd := &batchDaemon{refuse: func(call, items int) answer { return burstRefusal(items) }}
		r, clk := bd.addTimers(t, 1)
		if r.code != ExitUsage || len(bd.calls()) != 1 || len(clk.pauses()) != 0 {
			t.Errorf("exit %d, %d calls, pauses %v; want %d after one call, no pause", r.code, len(bd.calls()), clk.pauses(), ExitUsage)
		}
	})
}

// TestAddFromFileDaemonUnavailable holds how --from-file meets a daemon
// that cannot answer: a call the daemon certainly registered nothing of —
// answered 503 with Retry-After, as it does while starting, or never
// connected, as while it is stopped — is sent again, the same
// registrations, after the Retry-After or wait's backoff, saying once on
// stderr that it tries again, at most maxRateTries times in a row. A
// call that may have registered — a 503 without Retry-After (the
// database's, which a commit whose answer was lost reads as), a
// connection dropped after the request was sent — is not sent again:
// that could register its lines twice.
func TestAddFromFileDaemonUnavailable(t *testing.T) {
	t.Parallel()
	t.Run("starting", func(t *testing.T) {
		t.Parallel()
		bd := &batchDaemon{refuse: func(call, items int) answer {
			switch call {
			case 1:
				return answerStarting
			case 2:
				return errorAnswer(503, vigil.CodeUnavailable, "vigil is starting; try again shortly", "1")
			}
			return nil
		}}
		r, clk := bd.addTimers(t, 3)
		if r.code != 0 || r.stdout != "W3-0\nW3-1\nW3-2\n" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0 and the ids of call 3", r.code, r.stdout, r.stderr)
		}
		checkRetried(t, r, clk, "vigil is starting; try again shortly", []time.Duration{3 * time.Second, time.Second})
		calls := bd.calls()
		if len(calls) != 3 || string(calls[0]) != string(calls[1]) || string(calls[1]) != string(calls[2]) {
			t.Errorf("%d calls, want 3 of the same registrations", len(calls))
		}
	})
	t.Run("not listening", func(t *testing.T) {
		t.Parallel()
		bd := &batchDaemon{}
		ln := listenAt(t, "127.0.0.1:0", bd)
		addr := ln.Addr().String()
		ln.Close() // the daemon is stopped
		clk := newFakeClock()
		clk.onSleep = func(n int) {
			if n == 2 { // the daemon is listening again
				listenAt(t, addr, bd)
			}
		}
		r := cliRun{vars: addrEnv(addr), clock: clk}.run(t.Context(), "add", "--from-file", writeLines(t, timerLines(2)), "--for", "amy", "-q")
		if r.code != 0 || r.stdout != "W1-0\nW1-1\n" {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0 and the ids of call 1", r.code, r.stdout, r.stderr)
		}
		checkRetried(t, r, clk, "vigil daemon not reachable at "+addr+": ", []time.Duration{retryFirst, 2 * retryFirst})
	})
	for _, tc := range []struct {
		name   string
		answer answer
		stderr string
	}{
		{"database unavailable", errorAnswer(503, vigil.CodeUnavailable, "vigil's PostgreSQL database cannot be reached: try again", ""),
			"vigil: vigil's PostgreSQL database cannot be reached: try again\n"},
		{"connection dropped", answerDropped, "vigil: vigil daemon not reachable at "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bd := &batchDaemon{refuse: func(call, items int) answer { return tc.answer }}
			r, clk := bd.addTimers(t, 3)
			want := "The registrations of lines 1 to 3 were in the call that failed and may or may not have been registered.\n" + rerunLine + tc.stderr
			if r.code != ExitUsage || !strings.HasPrefix(r.stderr, want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q…", r.code, r.stdout, r.stderr, ExitUsage, want)
			}
			if n := len(bd.calls()); n != 1 || len(clk.pauses()) != 0 {
				t.Errorf("%d calls, pauses %v; want one call, no pause", n, clk.pauses())
			}
		})
	}
	t.Run("bounds", func(t *testing.T) {
		t.Parallel()
		bd := &batchDaemon{refuse: func(call, items int) answer { return answerStarting }}
		r, clk := bd.addTimers(t, 3)
		want := "vigil: vigil is starting; try again shortly; trying again (Ctrl-C to stop)\nvigil: vigil is starting; try again shortly\n"
		if r.code != ExitUsage || r.stderr != want {
			t.Errorf("exit %d, stderr %q; want %d, %q", r.code, r.stderr, ExitUsage, want)
		}
		if n := len(bd.calls()); n != 1+maxRateTries {
			t.Errorf("%d calls, want %d", n, 1+maxRateTries)
		}
		checkPauses(t, clk, slices.Repeat([]time.Duration{3 * time.Second}, maxRateTries))
	})
}

// rerunLine is what --from-file says of running the file again when a
// call it sent may have been registered.
const rerunLine = "Running the file again registers none of its lines twice only if each carries an idempotency_key " +
	"(the same line with the same key within 24 h is answered with the watch it made) or its watch is still pending " +
	"(the same condition for the same recipient is answered `existing`; a watch settled meanwhile is registered anew, " +
	"as is a timer given `in`, which counts from each registration).\n"

// TestAddFromFileSaysWhatWasSent holds what --from-file says on stderr
// when a call in the middle of a file fails for good: the lines before
// it were sent, those after it were not, and the call's own were not
// either when the call certainly registered nothing (the daemon starting
// until the tries are spent, or Ctrl-C during the pause before the next
// try), or may or may not have been registered when the call was sent and
// its answer lost (a 503 without Retry-After, a connection dropped), with
// what running the file again does. 250 lines go in calls of 62 (each
// call of more than 100 is refused whole and halved), and the fourth
// call, lines 63 to 124, fails.
func TestAddFromFileSaysWhatWasSent(t *testing.T) {
	t.Parallel()
	const (
		certain = "The registrations of lines 1 to 62 were sent; those from line 63 on were not.\n"
		inDoubt = "The registrations of lines 1 to 62 were sent; those of lines 63 to 124 were in the call that failed and may or may not have been registered; " +
			"those from line 125 on were not sent.\n" + rerunLine
		again = "vigil: vigil is starting; try again shortly; trying again (Ctrl-C to stop)\n"
	)
	fourthFails := func(a answer) *batchDaemon {
		return &batchDaemon{refuse: func(call, items int) answer {
			switch {
			case items > 100:
				return burstRefusal(items)
			case call >= 4:
				return a
			}
			return nil
		}}
	}
	for _, tc := range []struct {
		name   string
		answer answer
		stderr string
	}{
		{"tries spent", answerStarting, again + certain + "vigil: vigil is starting; try again shortly\n"},
		{"database unavailable", errorAnswer(503, vigil.CodeUnavailable, "vigil's PostgreSQL database cannot be reached: try again", ""),
			inDoubt + "vigil: vigil's PostgreSQL database cannot be reached: try again\n"},
		{"connection dropped", answerDropped, inDoubt + "vigil: vigil daemon not reachable at "},
		// Refused whole before anything is registered: certain.
		{"token revoked", errorAnswer(401, vigil.CodeUnauthorized, "the token was revoked", ""),
			certain + "vigil: the token was revoked\n"},
		{"disk full", errorAnswer(507, vigil.CodeStorageFull, "the disk is full, so nothing was written", ""),
			certain + "vigil: the disk is full, so nothing was written\n"},
		{"body over a lower bound", errorAnswer(413, vigil.CodePayloadTooLarge, "the request body is over 65536 bytes", ""),
			certain + "vigil: the request body is over 65536 bytes\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, _ := fourthFails(tc.answer).addTimers(t, 250)
			if r.code != ExitUsage || !strings.HasPrefix(r.stderr, tc.stderr) || strings.Count(r.stdout, "\n") != 62 {
				t.Errorf("exit %d, %d lines on stdout, stderr %q; want %d, 62 and %q…", r.code, strings.Count(r.stdout, "\n"), r.stderr, ExitUsage, tc.stderr)
			}
		})
	}
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(fourthFails(answerStarting))
		defer srv.Close()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		clk := newFakeClock()
		clk.onSleep = func(int) { cancel() } // Ctrl-C
		r := cliRun{vars: scriptedEnv(srv), clock: clk}.run(ctx, "add", "--from-file", writeLines(t, timerLines(250)), "--for", "amy", "-q")
		if r.code != ExitInterrupted || r.stderr != again+certain {
			t.Errorf("exit %d, stderr %q; want %d, %q", r.code, r.stderr, ExitInterrupted, again+certain)
		}
	})
}

// TestFromFileSent holds the wording of fromFileSent for each place of
// the failed call in the file, by the file's line numbers (a blank line
// is no registration: here lines 1, 2, 4, 5 and 7 are).
func TestFromFileSent(t *testing.T) {
	t.Parallel()
	var lines []fromFileLine
	for _, n := range []int{1, 2, 4, 5, 7} {
		lines = append(lines, fromFileLine{line: n})
	}
	for _, tc := range []struct {
		start, end int
		nothing    bool
		want       string
	}{
		{0, 2, true, ""},
		{2, 4, true, "The registrations of lines 1 to 3 were sent; those from line 4 on were not.\n"},
		{0, 5, false, "The registrations of lines 1 to 7 were in the call that failed and may or may not have been registered.\n" + rerunLine},
		{0, 1, false, "The registration of line 1 was in the call that failed and may or may not have been registered; those from line 2 on were not sent.\n" + rerunLine},
		{2, 3, false, "The registrations of lines 1 to 3 were sent; that of line 4 was in the call that failed and may or may not have been registered; " +
			"those from line 5 on were not sent.\n" + rerunLine},
		{3, 5, false, "The registrations of lines 1 to 4 were sent; those of lines 5 to 7 were in the call that failed and may or may not have been registered.\n" + rerunLine},
	} {
		if got := fromFileSent(lines, tc.start, tc.end, tc.nothing); got != tc.want {
			t.Errorf("fromFileSent(…, %d, %d, %t) = %q, want %q", tc.start, tc.end, tc.nothing, got, tc.want)
		}
	}
}

// TestAddFromFileRefusesOtherFlags holds that a flag of add that sets a
// registration's field is refused with --from-file, naming it, before
// anything is sent (exit 2, as a usage error): each line carries its own
// fields, and the flag would be ignored. The flags that do go with it —
// --for, the output's and the client's — are taken.
func TestAddFromFileRefusesOtherFlags(t *testing.T) {
	t.Parallel()
	bd := &batchDaemon{}
	srv := httptest.NewServer(bd)
	defer srv.Close()
	p := writeLines(t, timerLines(1))
	for _, flags := range [][]string{
		{"--deadline", "3h"}, {"--every", "1m"}, {"--mode", "unless"}, {"--note", "n"}, {"--label", "task=T-1"},
		{"--idempotency-key", "k"}, {"--predicate", "{}"}, {"--observe"}, {"--wait"}, {"--webhook", "https://x.test/h"},
		{"--retry-unknown"}, {"--on-done", "true"}, {"--on-fail", "true"}, {"--email", "a@x.test"}, {"--progress"},
		{"--wake", "claude:s1"}, {"--wake-argv", `["a"]`}, {"--deliver", "{}"},
	} {
		r := runCLI(t, scriptedEnv(srv), append([]string{"add", "--from-file", p}, flags...)...)
		want := "vigil: --from-file takes no " + flags[0] + ": each line of the file is a whole registration and carries its own fields"
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("add --from-file %v: exit %d, stderr %q; want %d, %q…", flags, r.code, r.stderr, ExitUsage, want)
		}
	}
	r := runCLI(t, scriptedEnv(srv), "add", "--from-file", p, "--label", "a=b", "--deadline", "1h")
	if want := "vigil: --from-file takes no --deadline or --label: "; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("two flags: stderr %q, want it to start %q", r.stderr, want)
	}
	if n := len(bd.calls()); n != 0 {
		t.Errorf("%d calls sent, want none", n)
	}
	for _, flags := range [][]string{{"--for", "amy"}, {"--json"}, {"-q"}, {"--addr", srv.URL, "--token", "vgl_test"}} {
		if r := runCLI(t, scriptedEnv(srv), append([]string{"add", "--from-file", p}, flags...)...); r.code != 0 {
			t.Errorf("add --from-file %v: exit %d, stderr %q; want 0", flags, r.code, r.stderr)
		}
	}
}
