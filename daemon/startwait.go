package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/vigil-run/vigil"
)

// startUnavailable bounds how long each step of a start on PostgreSQL
// (opening the store, comparing the signing keys, loading the pending
// watches) waits for a database
// that answers unavailable (restarting, failing over): past it the start
// fails, saying so.
const startUnavailable = 30 * time.Second

// untilAvailable calls fn until it returns anything but an unavailable
// error (vigil.CodeUnavailable), a second apart and for startUnavailable
// at most, logging the first such error once, with what it was doing; it
// returns fn's last error, or ctx's. A start that met the database
// restarting failed at once, and a supervisor starting it again met the
// same outage. sleep waits d unless ctx ends first (nil: sleepErr).
func untilAvailable(ctx context.Context, log *slog.Logger, what string, sleep func(context.Context, time.Duration) error, fn func() error) error {
	if sleep == nil {
		sleep = sleepErr
	}
	for waited := time.Duration(0); ; waited += time.Second {
		err := fn()
		if vigil.ErrorCode(err) != vigil.CodeUnavailable || waited >= startUnavailable {
			return err
		}
		if waited == 0 {
			log.Warn(what+": the database is unavailable; trying again every second", "for_at_most", startUnavailable, "err", err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// sleepErr waits d unless ctx ends first, then returning ctx's error.
func sleepErr(ctx context.Context, d time.Duration) error {
	if !sleepCtx(ctx, d) {
		return ctx.Err()
	}
	return nil
}
