package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vigil-run/vigil"
)

// EnvChainDepth names the variable a vigil-started command finds its
// chain depth in; add sends it to the daemon, which refuses registrations
// from too deep a chain.
const EnvChainDepth = "VIGIL_CHAIN_DEPTH"

// chainDepth reads VIGIL_CHAIN_DEPTH: 0 when unset.
func chainDepth(e *env) (int, error) {
	v := strings.TrimSpace(e.getenv(EnvChainDepth))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usageErr(fmt.Errorf("%s must be a non-negative whole number, not %q", EnvChainDepth, v))
	}
	return n, nil
}

// printCompletion shows a token watch's completion URL, once, with an
// example call.
func printCompletion(out io.Writer, w *vigil.Watch) {
	if w.CompletionURL == "" {
		return
	}
	u := term(w.CompletionURL)
	fmt.Fprintf(out, "Completion URL (shown only now; it is a secret): %s\n", u)
	fmt.Fprintf(out, "Complete it with:\n  curl -fsS -X POST -H 'Content-Type: application/json' -d '{\"status\":\"success\"}' '%s'\n", u)
}
