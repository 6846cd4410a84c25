package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigil-run/vigil/watcher/run"
)

// A run predicate's canonical form: the tail is filled in.
func Example() {
	w := run.New(run.Config{AllowExec: true, Dir: "/var/lib/vigil/run"})
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"shell":"make release","cwd":"/src/app"}`), time.Time{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(c.Predicate))
	// Output: {"cwd":"/src/app","shell":"make release","tail":65536}
}
