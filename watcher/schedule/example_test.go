package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigil-run/vigil/watcher/schedule"
)

// A schedule's canonical predicate, and when it fires next.
func Example() {
	w := schedule.New(schedule.Config{AllowExec: true})
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"cron":"0 9 * * 1-5","tz":"UTC","argv":["./report.sh"],"cwd":"/srv/app"}`), time.Time{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(c.Predicate))
	friday := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	next, _ := w.NextDue(c.Predicate, friday, friday)
	fmt.Println(next.Format(time.RFC1123))
	// Output:
	// {"argv":["./report.sh"],"cron":"0 9 * * 1-5","cwd":"/srv/app","timeout":"1m","tz":"UTC"}
	// Mon, 30 Nov 2026 09:00:00 UTC
}
