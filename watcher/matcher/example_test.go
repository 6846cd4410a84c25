package matcher_test

import (
	"encoding/json"
	"fmt"

	"github.com/vigil-run/vigil/watcher/matcher"
)

func Example() {
	done, err := matcher.ParseList(json.RawMessage(`[
		{"path": "status.phase", "equals": "Ready"},
		{"path": "status.replicas", "gte": 3}
	]`), "done")
	if err != nil {
		fmt.Println(err)
		return
	}
	body := []byte(`{"status": {"phase": "Ready", "replicas": 2}}`)
	ev := matcher.Evaluate(done, body)
	fmt.Println(ev.Matched, ev.Summary())

	_, err = matcher.Parse(json.RawMessage(`{"path": "x", "matches": "(a"}`), "done[1]")
	fmt.Println(err)
	// Output:
	// false status.phase = "Ready"; status.replicas = 2
	// predicate.done[1].matches is not a valid RE2 regular expression: missing closing ): `(a`
}
