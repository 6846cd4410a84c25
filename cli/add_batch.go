package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
)

// maxLineBytes bounds one line of a --from-file file: a registration is
// far smaller (the daemon bounds a whole request to 1 MiB).
const maxLineBytes = 1 << 20

// fromFileLine is one registration read from a --from-file file, with the
// line it came from.
type fromFileLine struct {
	line int
	req  vigil.RegisterRequest
}

// addFromFile registers every line of a JSON Lines file, each a
// registration object as POST /v1/watches takes it, in batches of
// vigil.MaxBatch (one call and one commit each), and prints one line per
// registration. The file is read and checked whole before anything is
// sent: a line that is not a registration object sends nothing. A
// registration without a recipient goes to --for (or the default).
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
	for n := 1; sc.Scan(); n++ {
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
		if dec.More() {
			return usageErr(fmt.Errorf("%s line %d: more than one JSON value on the line", path, n))
		}
		if req.Recipient == "" {
			req.Recipient = recipient
		}
		req.ChainDepth = depth
		lines = append(lines, fromFileLine{line: n, req: req})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return usageErr(fmt.Errorf("%s: a line is longer than %d bytes", path, maxLineBytes))
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
	refused := 0
	for start := 0; start < len(lines); start += vigil.MaxBatch {
		chunk := lines[start:min(start+vigil.MaxBatch, len(lines))]
		reqs := make([]vigil.RegisterRequest, len(chunk))
		for i, l := range chunk {
			reqs[i] = l.req
		}
		res, err := c.RegisterBatch(cmd.Context(), reqs)
		if err != nil {
			if start > 0 {
				fmt.Fprintf(e.stderr, "The registrations of lines 1 to %d were sent; those from line %d on were not.\n", chunk[0].line-1, chunk[0].line)
			}
			return callErr(cmd, err)
		}
		for i, r := range res {
			if r.Status == vigil.BatchRefused {
				refused++
			}
			if err := f.printBatchResult(e, chunk[i].line, r); err != nil {
				return err
			}
		}
	}
	if refused > 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%d of %d registrations were refused", refused, len(lines))}
	}
	return nil
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
