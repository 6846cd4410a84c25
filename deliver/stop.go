package deliver

import (
	"sync"
	"time"
)

// wind waits for the attempts in flight as Run stops (the workers of wg),
// for StopGrace at most: then cut, the end of the attempts' context, cuts
// short those still going, and wind waits for them to record what they
// can. The grace runs on a timer, so tests run it inside testing/synctest.
func (d *Dispatcher) wind(wg *sync.WaitGroup, cut func()) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	if d.cfg.StopGrace > 0 {
		if n := d.inFlight(); n > 0 {
			d.log.Info("stopping: letting the delivery attempts in flight finish", "attempts", n, "grace", d.cfg.StopGrace)
		}
		t := time.NewTimer(d.cfg.StopGrace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
			d.log.Warn("stopping: the delivery attempts still in flight after the grace are cut short", "attempts", d.inFlight(), "grace", d.cfg.StopGrace)
		}
	}
	cut()
	<-done
}

// inFlight counts the attempts in flight (takeOff to land).
func (d *Dispatcher) inFlight() int {
	dr := &d.drain
	dr.mu.Lock()
	defer dr.mu.Unlock()
	n := 0
	for _, k := range dr.flying {
		n += k
	}
	return n
}
