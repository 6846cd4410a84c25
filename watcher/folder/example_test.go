package folder_test

import (
	"context"
	"fmt"

	"github.com/vigil-run/vigil/watcher/folder"
)

// A folder predicate in its canonical form: defaults filled, globs split
// and sorted, and standing set, which makes the watch standing.
func ExampleWatcher_Canonicalize() {
	w := folder.New(folder.Config{})
	c, err := w.Canonicalize(context.Background(), []byte(`{"path": "/src/app", "pattern": "*.go, docs/**/*.{md,txt}", "standing": true}`), t0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(c.Predicate))
	fmt.Println("standing:", c.Standing)
	// Output:
	// {"max_file_bytes":1048576,"max_files":2000,"max_wait":"1m40s","path":"/src/app","pattern":["*.go","docs/**/*.{md,txt}"],"report_max_chars":24000,"settle":"20s","standing":true}
	// standing: true
}
