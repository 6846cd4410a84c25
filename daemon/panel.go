package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/web"
)

// panelStatus is the daemon's status for the panel's admin page.
func (d *Daemon) panelStatus(context.Context) web.Status {
	ps := d.metrics.Probes(0.5, 0.9, 0.99)
	st := web.Status{Version: vigil.Version(), Started: d.started, Store: d.cfg.StoreName(), Probes: int64(ps.Probes)}
	if up := time.Since(d.started).Seconds(); up > 0 {
		st.ProbesPerSecond = float64(ps.Probes) / up
	}
	if ps.Probes > 0 {
		for _, q := range []float64{0.5, 0.9, 0.99} {
			st.Lateness = append(st.Lateness, web.Percentile{Name: fmt.Sprintf("p%g", q*100), Value: ps.Lateness[q]})
		}
	}
	return st
}
