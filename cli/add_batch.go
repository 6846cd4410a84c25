package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/internal/wire"
)

// maxLineBytes bounds one line of a --from-file file: a registration is
// far smaller (the daemon bounds a whole request to 1 MiB).
const maxLineBytes = 1 << 20

// Bounds of one call of --from-file: the body of POST /v1/watches/batch
// is the envelope {"watches":[…]} around the registrations, comma
// separated, and must stay within the daemon's bound of a request body.
const (
	batchBodyBytes = wire.DefaultMaxBodyBytes
	// batchEnvelopeBytes is the length of {"watches":[]}.
	batchEnvelopeBytes = len(`{"watches":[]}`)
	// maxItemBytes is the largest registration a call can carry.
	maxItemBytes = batchBodyBytes - batchEnvelopeBytes
)

// Bounds of --from-file's tries of a call refused for now, of which
// nothing was registered (unsent): it is sent again after the wait the
// daemon asks for, at most maxRateWait (longer than wait's bound, as a
// token's rate limit may ask for more), else after wait's backoff, up to
// maxRateTries times in a row.
const (
	maxRateWait  = time.Minute
	maxRateTries = 10
)

// fromFileLine is one registration read from a --from-file file, with the
// line it came from and its size as JSON in a call's body.
type fromFileLine struct {
	line int
	req  vigil.RegisterRequest
	size int
}

// tooLarge reports whether l cannot go in any call: it is refused in its
// place.
func (l fromFileLine) tooLarge() bool { return l.size > maxItemBytes }

// nextBatch returns where the call that starts at lines[start] ends: it
// holds at most `most` registrations and a body within batchBodyBytes. A
// registration too large for any call (tooLarge) is within the range but
// not sent. The range holds one line at least.
func nextBatch(lines []fromFileLine, start, most int) (end int) {
	body, n := batchEnvelopeBytes, 0
	for end = start; end < len(lines) && n < most; end++ {
		l := lines[end]
		if l.tooLarge() {
			continue
		}
		add := l.size
		if n > 0 {
			add++ // the comma
		}
		if body+add > batchBodyBytes {
			break
		}
		body += add
		n++
	}
	return end
}

// fromFileFlags are the flags of add that go with --from-file: the
// client's, --for (the recipient of a line that names none) and the
// output's. Every other sets a registration's field, which each line
// carries for itself.
var fromFileFlags = map[string]bool{"from-file": true, "for": true, "addr": true, "token": true, "data-dir": true, "json": true, "quiet": true}

// fromFileAlone refuses, as a usage error naming them, the flags given
// with --from-file that do not go with it: each line of the file carries
// its own fields, and such a flag would be ignored.
func fromFileAlone(cmd *cobra.Command) error {
	var bad []string
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if !fromFileFlags[fl.Name] {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) == 0 {
		return nil
	}
	return usageErr(fmt.Errorf("--from-file takes no %s: each line of the file is a whole registration and carries its own fields (deadline, every, mode, note, labels, deliver, idempotency_key, …)",
		strings.Join(bad, " or ")))
}

// addFromFile registers every line of a JSON Lines file, each a
// registration object as POST /v1/watches takes it, in batches of up to
// vigil.MaxBatch whose bodies stay within the daemon's bound (one call
// and one commit each), and prints one line per registration. The file is
// read and checked whole before anything is sent: a line that is not a
// registration object sends nothing; one too large for any call is
// refused in its place. A registration without a recipient goes to --for
// (or the default). Under a scoped token's rate limit, a call larger than
// the token's burst is halved until it passes, and one refused for now is
// sent again after the wait the daemon asks for; so is one the daemon
// could not take (it was starting, or not listening), after a backoff when
// it names no wait. A call that may have registered is never sent again
// (unsent).
func (f *addFlags) addFromFile(cmd *cobra.Command, e *env, path string) error {
	var r io.Reader
	if path == "-" {
		r = cmd.InOrStdin()
	} else {
		file, err := os.Open(path)
		if err != nil {
			return usageErr(fmt.Errorf("--from-file: %w", err))
		}
		defer file.Close()
		r = file
	}
	depth, err := chainDepth(e)
	if err != nil {
		return err
	}
	recipient := firstNonEmpty(f.recipient, defaultRecipient(e))
	var lines []fromFileLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	n := 0 // the line read last
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var req vigil.RegisterRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if b[0] != '{' {
			return usageErr(fmt.Errorf("%s line %d: each line must be one registration as a JSON object", path, n))
		}
		if err := dec.Decode(&req); err != nil {
			return usageErr(fmt.Errorf("%s line %d: %v", path, n, err))
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return usageErr(fmt.Errorf("%s line %d: more than one JSON value on the line", path, n))
		}
		if key, twice := wire.DuplicateKey(b); twice {
			// As POST /v1/watches refuses it: which value was meant?
			return usageErr(fmt.Errorf("%s line %d: key %q is given twice; give each key once", path, n, key))
		}
		if req.Recipient == "" {
			req.Recipient = recipient
		}
		req.ChainDepth = depth
		enc, err := json.Marshal(req)
		if err != nil {
			return usageErr(fmt.Errorf("%s line %d: %v", path, n, err))
		}
		lines = append(lines, fromFileLine{line: n, req: req, size: len(enc)})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			// The scanner stopped inside the line after the last read.
			return usageErr(fmt.Errorf("%s line %d: the line is longer than %d bytes", path, n+1, maxLineBytes))
		}
		return usageErr(fmt.Errorf("--from-file: %w", err))
	}
	if len(lines) == 0 {
		return usageErr(fmt.Errorf("%s holds no registration: write one JSON object per line", path))
	}
	c, err := f.client(e)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	// rt paces the calls sent again, and says on stderr when the daemon
	// cannot answer; a rate limit is the token's pace, said nowhere.
	rt := e.retrier(0)
	rt.afterMax = maxRateWait
	tell := rt.retrying
	rt.retrying = func(err error) {
		if vigil.ErrorCode(err) == vigil.CodeUnavailable {
			tell(err)
		}
	}
	// most is how many registrations a call may hold: halved while the
	// daemon says a call holds more than the token may register at once.
	most, tries, refused := vigil.MaxBatch, 0, 0
	for start, end := 0, 0; start < len(lines); start = end {
		end = nextBatch(lines, start, most)
		chunk := lines[start:end]
		var reqs []vigil.RegisterRequest
		for _, l := range chunk {
			if !l.tooLarge() {
				reqs = append(reqs, l.req)
			}
		}
		var res []vigil.BatchResult
		if len(reqs) > 0 {
			var err error
			if res, err = c.RegisterBatch(ctx, reqs); err != nil {
				// A call of which nothing was registered (unsent) may be
				// sent again, or in halves, without registering a line
				// twice.
				_, said := client.RetryAfter(err)
				nothing := unsent(err) // of this call's error, not the pause's
				switch {
				case ctx.Err() != nil || !nothing:
				case vigil.ErrorCode(err) == vigil.CodeRateLimited && !said:
					// More than the token's burst: it never passes whole.
					if len(reqs) > 1 {
						most, end = len(reqs)/2, start
						continue
					}
				case tries < maxRateTries:
					tries++
					if err = rt.pause(ctx, err); err == nil {
						end = start
						continue
					}
				}
				fmt.Fprint(e.stderr, fromFileSent(lines, start, end, nothing))
				return callErr(cmd, err)
			}
		}
		tries = 0
		rt.answered()
		for _, l := range chunk {
			r := vigil.BatchResult{Status: vigil.BatchRefused, Err: vigil.Errorf(vigil.CodePayloadTooLarge,
				"the registration is %d bytes as JSON, more than the %d one request may carry", l.size, maxItemBytes)}
			if !l.tooLarge() {
				r, res = res[0], res[1:]
			}
			if r.Status == vigil.BatchRefused {
				refused++
			}
			if err := f.printBatchResult(e, l.line, r); err != nil {
				return err
			}
		}
	}
	if refused > 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%d of %d registrations were refused", refused, len(lines))}
	}
	return nil
}

// fromFileSent says which lines of a --from-file file were sent when the
// call of lines[start:end] failed: those before it were, and those after
// it were not. The call's own were not either when it registered nothing
// for certain (nothing: unsent); else they may or may not have been
// registered, and it says what running the file again does then: a line
// with an idempotency key is answered from the ledger (for 24 h,
// vigil.Limits.IdempotencyTTL), one whose watch is still pending with that
// watch (existing), and any other is registered anew.
func fromFileSent(lines []fromFileLine, start, end int, nothing bool) string {
	first, last := lines[start].line, lines[end-1].line
	if nothing {
		if start == 0 {
			return ""
		}
		return fmt.Sprintf("The registrations of lines 1 to %d were sent; those from line %d on were not.\n", first-1, first)
	}
	var b strings.Builder
	switch {
	case start > 0 && first == last:
		fmt.Fprintf(&b, "The registrations of lines 1 to %d were sent; that of line %d was", first-1, first)
	case start > 0:
		fmt.Fprintf(&b, "The registrations of lines 1 to %d were sent; those of lines %d to %d were", first-1, first, last)
	case first == last:
		fmt.Fprintf(&b, "The registration of line %d was", first)
	default:
		fmt.Fprintf(&b, "The registrations of lines %d to %d were", first, last)
	}
	b.WriteString(" in the call that failed and may or may not have been registered")
	if end < len(lines) {
		fmt.Fprintf(&b, "; those from line %d on were not sent", lines[end].line)
	}
	b.WriteString(".\nRunning the file again registers none of its lines twice only if each carries an idempotency_key " +
		"(the same line with the same key within 24 h is answered with the watch it made) or its watch is still pending " +
		"(the same condition for the same recipient is answered `existing`; a watch settled meanwhile is registered anew, " +
		"as is a timer given `in`, which counts from each registration).\n")
	return b.String()
}

// unsent reports whether err, the failure of a call, says for certain that
// the daemon registered none of it, so that sending it again registers no
// line twice. A call refused with rate_limited registered nothing: the
// daemon takes a batch from the token's rate limit, all or none, before it
// registers any. Of the calls failed unavailable, two registered nothing
// for certain: one answered 503 with Retry-After, which the daemon answers
// only while it starts, before any route runs (its start-up gate), and one
// that never connected (the daemon is stopped, or not listening yet): the
// request never left. Any other may have registered the call — a 503
// without Retry-After, which the daemon answers when its database fails
// (a commit whose answer was lost among those failures), a proxy's 502 or
// 504, a connection that dropped or a wait that ran out once the request
// was sent — and sending it again could register its lines twice: the
// daemon answers a registration of a pending watch with that watch, but a
// watch settled meanwhile is registered anew, and only a line that carries
// an idempotency key is answered from the ledger.
//
// Any other answer the daemon gave refused the call whole before it
// registered any of it: the token (unauthorized, forbidden), the body
// (invalid_request, payload_too_large: a daemon whose bound is lower than
// the default), or a commit that wrote nothing (storage_full). Only
// internal (and a call the caller gave up on, which is no answer) may have
// come after the commit.
func unsent(err error) bool {
	switch vigil.ErrorCode(err) {
	case vigil.CodeUnavailable:
		if _, said := client.RetryAfter(err); said {
			return true
		}
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial"
	case vigil.CodeInternal:
		return false
	}
	return true
}

// printBatchResult prints what became of one line: a sentence, the id
// (--quiet), or a JSON object (--json).
func (f *addFlags) printBatchResult(e *env, line int, r vigil.BatchResult) error {
	switch {
	case f.json:
		out := struct {
			Line    int          `json:"line"`
			Status  string       `json:"status"`
			Watch   *vigil.Watch `json:"watch,omitempty"`
			Code    vigil.Code   `json:"code,omitempty"`
			Message string       `json:"message,omitempty"`
		}{Line: line, Status: r.Status, Watch: r.Watch}
		if r.Err != nil {
			out.Code, out.Message = vigil.ErrorCode(r.Err), vigil.ErrorMessage(r.Err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	case r.Status == vigil.BatchRefused:
		fmt.Fprintf(e.stdout, "line %d: refused (%s): %s\n", line, term(string(vigil.ErrorCode(r.Err))), oneLine(vigil.ErrorMessage(r.Err)))
	case f.quiet:
		fmt.Fprintln(e.stdout, term(r.Watch.ID))
	default:
		fmt.Fprintf(e.stdout, "line %d: ", line)
		printAdded(e.stdout, r.Watch)
	}
	return nil
}
