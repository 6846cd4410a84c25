package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vigil-run/vigil"
)

// TestInterpretErrorUnavailable: what says the database cannot be
// reached, or ended the connection under a statement, answers
// unavailable, so that callers try again; a connection closed mid-read
// (an EOF: the server gone without a word, a proxy or the network cutting
// it) was an internal error, and a replica's start failed on it.
func TestInterpretErrorUnavailable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want vigil.Code
	}{
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), vigil.CodeUnavailable},
		{"EOF", fmt.Errorf("receive message: %w", io.EOF), vigil.CodeUnavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, vigil.CodeUnavailable},
		{"admin shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, vigil.CodeUnavailable},
		{"another error", errors.New("a row that does not decode"), vigil.CodeInternal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := vigil.ErrorCode(interpretError(tt.err)); got != tt.want {
				t.Errorf("interpretError(%v) has code %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
