package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
)

// scale: at each size, the daemon idle with that many pending timers due
// in hours, then a storm of that many timers due at one instant.
func scale(ctx context.Context, e *env, sizes []int) error {
	if err := scaleIdle(ctx, e, sizes); err != nil {
		return err
	}
	return scaleStorm(ctx, e, sizes)
}

func scaleIdle(ctx context.Context, e *env, sizes []int) error {
	it := &table{
		title: fmt.Sprintf("scale idle: pending timers due in 2 h, nothing due — vigil serve, %s; window %v, from 5 s after /readyz", durability, e.cfg.idle),
		head:  []string{"pending", "made by", "daemon CPU/min (ticks)", "(schedstat)", "client CPU/min (ticks)", "(schedstat)", "daemon+client CPU/min (schedstat)", "daemon bytes written", "daemon RSS"},
	}
	for _, n := range sizes {
		if err := idle(ctx, e, n, it); err != nil {
			return err
		}
	}
	it.note("CPU from /proc/PID/stat utime+stime in 10 ms ticks (0 = under 10 ms in the window), and the threads' run time from /proc/PID/task/*/schedstat (ns); per minute; the client is this process, which does nothing in the window")
	it.note("bytes written: /proc/PID/io write_bytes of the daemon over the window")
	it.note("the Go runtime forces a garbage collection when none ran for 2 minutes, marking the whole heap; a window of -idle 60s starting 5 s after ready usually misses it (priming ran one): use -idle 2m or more to include one")
	it.print()
	return nil
}

func scaleStorm(ctx context.Context, e *env, sizes []int) error {
	st := &table{
		title: fmt.Sprintf("scale storm: N timers due at one instant T — vigil serve, %s; each settlement committed with its mailbox message", durability),
		head:  []string{"N", "made by", "lead", "all settled after T", "settled_at − T p50", "p99", "max", "earliest", "fired", "messages", "settled/s", "daemon CPU in storm"},
	}
	for _, n := range sizes {
		if err := storm(ctx, e, n, st); err != nil {
			return err
		}
	}
	how := "the daemon's committed pending count (the counters row of the total, updated in the transaction of each settlement and its message), read from its database file by a read-only connection in this process every 10 ms"
	if e.cfg.stormWatch == "api" {
		how = "GET /v1/watches?state=pending&limit=1 through the client every 20 ms until it lists none (as bench/peers does)"
	}
	st.note("all settled: from T until %s; a pending list through the API then confirmed none was left", how)
	st.note("settled_at: each watch's stamp (ms, before its batch's commit), read from the store after the daemon stopped; fired and messages: watches in state fired and outcome messages in the mailbox, counted there too")
	st.note("made by: http = registered through the daemon's API by this process, the same daemon then storms (as bench/peers); store = registered in-process through engine.Register on store/sqlite (synchronous=FULL), then a fresh daemon started and primed before T")
	st.note("one timer per recipient (s0, s1, …): timers of one recipient at one instant would be one watch (same identity)")
	st.print()
	return nil
}

func idle(ctx context.Context, e *env, n int, t *table) error {
	f, err := e.pendingFixture(ctx, n)
	if err != nil {
		return err
	}
	free()
	progressf("scale idle: %d pending, %v", n, e.cfg.idle)
	d, err := e.start(f.dataDir)
	if err != nil {
		return err
	}
	row, err := func() ([]string, error) {
		if _, _, err := d.ready(5 * time.Minute); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Second)
		u0, err := readUsage(d.pid())
		if err != nil {
			return nil, err
		}
		s0, err := readUsage(os.Getpid())
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		time.Sleep(e.cfg.idle)
		u1, err := readUsage(d.pid())
		if err != nil {
			return nil, err
		}
		s1, err := readUsage(os.Getpid())
		if err != nil {
			return nil, err
		}
		w := time.Since(t0)
		perMin := func(d time.Duration) string {
			return msec(time.Duration(float64(d) * float64(time.Minute) / float64(w)))
		}
		return []string{count(int64(n)), f.method, perMin(u1.cpu - u0.cpu), perMin(u1.run - u0.run), perMin(s1.cpu - s0.cpu), perMin(s1.run - s0.run),
			perMin(u1.run - u0.run + s1.run - s0.run), count(u1.written-u0.written) + " B", mib(u1.rss)}, nil
	}()
	_, serr := d.stop(time.Minute)
	if err = errors.Join(err, serr); err != nil {
		return err
	}
	t.add(row...)
	return nil
}

// stormLead is how far ahead of T the timers are made unless -lead says:
// enough for the fill at a pessimistic rate, plus the daemon's start.
func (e *env) stormLead(n int) time.Duration {
	if e.cfg.lead > 0 {
		return e.cfg.lead
	}
	if e.fillMethod(n) == fillHTTP {
		return 15*time.Second + time.Duration(n)*300*time.Microsecond
	}
	return 30*time.Second + time.Duration(n)*200*time.Microsecond
}

func storm(ctx context.Context, e *env, n int, t *table) error {
	dir, err := e.dir(fmt.Sprintf("storm-%d", n))
	if err != nil {
		return err
	}
	dataDir := filepath.Join(dir, "data")
	dbPath := filepath.Join(dataDir, daemon.DatabaseFile)
	lead := e.stormLead(n)
	at := time.Now().Add(lead).Truncate(time.Millisecond)
	method := e.fillMethod(n)
	// What a start on n rows takes beyond the fill, roughly (restart
	// measured 1 000 000 in a few seconds); the fill gives up early when
	// it would end too late.
	startup := time.Second
	if method == fillStore {
		startup = 3*time.Second + time.Duration(n)*5*time.Microsecond
	}
	fillStart := time.Now()
	check := func(done int, el time.Duration) error {
		if done == 0 || (el < 10*time.Second && done < n/10) {
			return nil
		}
		end := fillStart.Add(time.Duration(float64(el)*float64(n)/float64(done)) + startup)
		if end.After(at.Add(-2 * time.Second)) {
			return fmt.Errorf("storm of %d: at %.0f registrations/s the timers would be ready about %v after their instant (lead %v): raise -lead",
				n, float64(done)/el.Seconds(), end.Sub(at).Round(time.Second), lead)
		}
		return nil
	}
	progressf("scale storm: %d timers due at %s (in %v), %s", n, at.Format("15:04:05.000"), lead, method)
	_, took, d, err := e.fillTimers(ctx, dataDir, n, func(i int) timerPlan { return timerPlan{recipient: "s" + strconv.Itoa(i), at: at} }, check, true)
	if err != nil {
		return err
	}
	free()
	row, err := func() ([]string, error) {
		if _, _, err := d.ready(5 * time.Minute); err != nil {
			return nil, err
		}
		if left := time.Until(at); left < time.Second {
			return nil, fmt.Errorf("storm of %d: the daemon was ready only %v before the instant: raise -lead (now %v)", n, left, lead)
		}
		progressf("  %d made in %v, the daemon is ready; %v to the instant", n, took.Round(time.Millisecond), time.Until(at).Round(time.Millisecond))
		c, err := d.client(4)
		if err != nil {
			return nil, err
		}
		var db *sql.DB
		if e.cfg.stormWatch == "store" {
			if db, err = sql.Open("sqlite", dbPath+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)"); err != nil {
				return nil, err
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			var p int64
			if err := db.QueryRowContext(ctx, "SELECT pending FROM counters WHERE recipient = ''").Scan(&p); err != nil {
				return nil, err
			}
			if p != int64(n) {
				return nil, fmt.Errorf("storm of %d: the store counts %d pending before the instant", n, p)
			}
		}
		time.Sleep(time.Until(at))
		u0, err := readUsage(d.pid())
		if err != nil {
			return nil, err
		}
		giveUp := at.Add(max(2*time.Minute, time.Duration(n)*300*time.Microsecond))
		var done time.Time
		for done.IsZero() {
			if time.Now().After(giveUp) {
				return nil, fmt.Errorf("storm of %d: not all settled %v after the instant", n, giveUp.Sub(at))
			}
			if db != nil {
				var p int64
				if err := db.QueryRowContext(ctx, "SELECT pending FROM counters WHERE recipient = ''").Scan(&p); err != nil {
					return nil, err
				}
				if p == 0 {
					done = time.Now()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
				continue
			}
			page, err := c.Watches(ctx, vigil.ListRequest{State: vigil.StatePending, Limit: 1})
			if err != nil {
				return nil, err
			}
			if len(page.Watches) == 0 {
				done = time.Now()
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		u1, err := readUsage(d.pid())
		if err != nil {
			return nil, err
		}
		if page, err := c.Watches(ctx, vigil.ListRequest{State: vigil.StatePending, Limit: 1}); err != nil {
			return nil, err
		} else if len(page.Watches) > 0 {
			return nil, fmt.Errorf("storm of %d: the store counts none pending but the API lists %s", n, page.Watches[0].ID)
		}
		all := done.Sub(at)
		return []string{count(int64(n)), method, lead.Round(time.Second).String(), msec(all), "", "", "", "", "", "", fmt.Sprintf("%.0f", float64(n)/all.Seconds()), msec(u1.cpu - u0.cpu)}, nil
	}()
	if _, serr := d.stop(time.Minute); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	// Per-watch figures from the store, the daemon stopped.
	s, err := stormStore(ctx, dbPath, at)
	if err != nil {
		return err
	}
	row[4], row[5], row[6], row[7] = msec(quantile(s.late, 0.5)), msec(quantile(s.late, 0.99)), msec(quantile(s.late, 1)), msec(quantile(s.late, 0))
	row[8], row[9] = count(int64(s.fired)), count(int64(s.messages))
	if s.fired != n || s.messages != n {
		t.note("storm of %s: %s watches fired and %s outcome messages, want %s each (states %v)", count(int64(n)), count(int64(s.fired)), count(int64(s.messages)), count(int64(n)), s.states)
	}
	t.add(row...)
	return os.RemoveAll(dir) // a 1 000 000 storm leaves a large store
}

type stormResult struct {
	late            []time.Duration
	states          map[string]int
	fired, messages int
}

func stormStore(ctx context.Context, dbPath string, at time.Time) (stormResult, error) {
	r := stormResult{states: map[string]int{}}
	db, err := sql.Open("sqlite", dbPath+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		return r, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT state, settled_at FROM watches")
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var settled sql.NullInt64
		if err := rows.Scan(&state, &settled); err != nil {
			return r, err
		}
		r.states[state]++
		if settled.Valid {
			r.late = append(r.late, time.UnixMilli(settled.Int64).Sub(at))
		}
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.fired = r.states[string(vigil.StateFired)]
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE type = 'fired'").Scan(&r.messages)
	return r, err
}
