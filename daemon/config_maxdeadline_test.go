package daemon_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
)

// TestValidateMaxDeadlineBounded: a max_deadline so long that a deadline
// it admits lies past 2262 cannot be held by the scheduler, which keeps
// deadlines as UnixNano (scheduler/entry.go:18): the nanoseconds wrap and
// the watch's deadline lands in the past (or anywhere). Validate must
// refuse it at the start instead.
func TestValidateMaxDeadlineBounded(t *testing.T) {
	c := daemon.DefaultConfig()
	c.DataDir, c.Roots = "/var/lib/vigil", []string{"/srv"}
	d, err := vigil.ParseDuration("100000d") // accepted by Load
	if err != nil {
		t.Fatal(err)
	}
	c.Limits.MaxDeadline = d
	if err := c.Validate(); err == nil {
		now := time.Now()
		dl, rerr := vigil.ResolveDeadline(vigil.KindHTTP, vigil.KindSpec{Every: time.Minute, Deadline: time.Hour},
			"2270-01-01T00:00:00Z", time.Time{}, now, c.Limits)
		t.Errorf("Validate(max_deadline 100000d) = nil; a watch may then ask for deadline %v (err %v), whose UnixNano %d is before now (%d)",
			dl, rerr, dl.UnixNano(), now.UnixNano())
	}
}
