package engine

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
)

// While the store cannot be reached (PostgreSQL restarting or failing
// over, a network cut), every watch that falls due fails its read or its
// settlement, and each was logged: a database down for 8 s gave three
// replicas holding 2 000 watches 1 218 error lines, and 100 000 watches
// probed every 10 s would give 10 000 a second. So an error that says the
// store is unavailable (vigil.CodeUnavailable) is logged once per
// outageLogEvery for each message, the next one logged (or, once the
// store answers again, a line at level Info) saying how many were not
// ("unlogged"); any other error is logged every time. The work
// itself is tried again as before: only the log is quieter.

// outageLogEvery is how often each message is logged for errors of a
// store that cannot be reached.
const outageLogEvery = 10 * time.Second

// outageLog decides which store errors are logged. Its zero value is
// ready.
type outageLog struct {
	// quieted is set while some message has errors not logged, so that
	// fine costs a successful call one atomic load.
	quieted atomic.Bool
	mu      sync.Mutex
	// last is when each message was last logged for an unavailable
	// store, unlogged how many such errors of it were not since; the
	// messages are the engine's own constants, so both stay small.
	last     map[string]time.Time
	unlogged map[string]int
}

// error logs msg with err and args at level Error on log, unless err says
// the store is unavailable and msg was logged for that less than
// outageLogEvery before now.
func (o *outageLog) error(log *slog.Logger, now time.Time, msg string, err error, args ...any) {
	if vigil.ErrorCode(err) != vigil.CodeUnavailable {
		log.Error(msg, append(args, "err", err)...)
		return
	}
	o.mu.Lock()
	if o.last == nil {
		o.last, o.unlogged = make(map[string]time.Time), make(map[string]int)
	}
	if last, ok := o.last[msg]; ok && now.Sub(last) < outageLogEvery && !now.Before(last) {
		o.unlogged[msg]++
		o.quieted.Store(true)
		o.mu.Unlock()
		return
	}
	n := o.unlogged[msg]
	o.last[msg] = now
	delete(o.unlogged, msg)
	o.quieted.Store(len(o.unlogged) > 0)
	o.mu.Unlock()
	if n > 0 {
		args = append(args, "unlogged", n)
	}
	log.Error(msg, append(args, "err", err)...)
}

// fine is told that what msg logs the failure of succeeded: the store
// answers again. The errors of msg not logged since the last one logged
// are then logged as a count, at level Info, so that an outage shorter
// than outageLogEvery is not told as its first error alone.
func (o *outageLog) fine(log *slog.Logger, msg string) {
	if !o.quieted.Load() {
		return
	}
	o.mu.Lock()
	n := o.unlogged[msg]
	if n > 0 {
		delete(o.unlogged, msg)
		delete(o.last, msg)
	}
	o.quieted.Store(len(o.unlogged) > 0)
	o.mu.Unlock()
	if n > 0 {
		log.Info(msg+": the store answers again", "unlogged", n)
	}
}
