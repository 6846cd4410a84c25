package daemon

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/vigil-run/vigil/web"
)

// panelStatus is the daemon's status for the panel's admin page.
func (d *Daemon) panelStatus(context.Context) web.Status {
	ps := d.metrics.Probes(0.5, 0.9, 0.99)
	st := web.Status{Version: buildVersion(), Started: d.started, Store: d.cfg.StoreName(), Probes: int64(ps.Probes)}
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

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v + " (" + bi.GoVersion + ")"
}
