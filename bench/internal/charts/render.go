// Package charts draws the SVG charts of docs/BENCHMARKS.md from the
// results files bench/peers writes (package results), with gonum's plot.
// The command bench/charts and bench/peers -charts call Render.
package charts

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

	"github.com/vigil-run/vigil/bench/internal/results"
)

// Chart size: as wide as a README column shows without scaling much.
const (
	chartW = 7 * vg.Inch
	chartH = 4.2 * vg.Inch
)

// maxFiles bounds how many results files one rendering reads.
const maxFiles = 1000

// runs are every run read, by scenario, with the files they came from.
type runs struct {
	files      []*results.File
	byScenario map[string][]results.Run
}

// load reads every *.json in dir.
func load(dir string) (*runs, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) > maxFiles {
		return nil, fmt.Errorf("%d results files in %s, at most %d", len(names), dir, maxFiles)
	}
	slices.Sort(names)
	rs := &runs{byScenario: map[string][]results.Run{}}
	for _, name := range names {
		f, err := results.Read(name)
		if err != nil {
			return nil, err
		}
		rs.files = append(rs.files, f)
		for _, r := range f.Runs {
			rs.byScenario[r.Scenario] = append(rs.byScenario[r.Scenario], r)
		}
	}
	return rs, nil
}

// Render draws every chart the results in dir allow into out and returns
// the files written. A chart whose scenario has no runs is not written.
func Render(in, out string) ([]string, error) {
	rs, err := load(in)
	if err != nil {
		return nil, err
	}
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
	charts := []struct {
		file string
		make func(*runs) (*plot.Plot, error)
	}{
		{"lateness-spread.svg", func(rs *runs) (*plot.Plot, error) {
			return lateness(rs, "spread", "Lateness: waits at random instants over a minute (spread)")
		}},
		{"lateness-storm.svg", func(rs *runs) (*plot.Plot, error) {
			return lateness(rs, "storm", "Lateness: waits all due at one instant (storm)")
		}},
		{"storm-drain.svg", drain},
		{"register.svg", register},
		{"batch.svg", batch},
		{"idle-cpu.svg", idle},
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range charts {
		p, err := c.make(rs)
		if err != nil {
			return written, fmt.Errorf("%s: %w", c.file, err)
		}
		if p == nil {
			continue
		}
		path := filepath.Join(out, c.file)
		if err := save(p, path); err != nil {
			return written, fmt.Errorf("%s: %w", c.file, err)
		}
		written = append(written, path)
	}
	return written, nil
}

// save writes p as SVG, whole or not at all.
func save(p *plot.Plot, path string) error {
	w, err := p.WriterTo(chartW, chartH, "svg")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return err
	}
	// The text is laid out with Liberation Sans's metrics; where a viewer
	// lacks it, Arial has the same metrics, then any sans-serif.
	svg := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif"))
	tmp, err := os.CreateTemp(filepath.Dir(path), ".chart-*.svg")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(svg); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// peerOrder puts the peers the docs name first, in the tables' order.
var peerOrder = []string{"vigil", "vigild", "river", "asynq", "polling", "naive"}

func peersOf(rs []results.Run) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		if !seen[r.Peer] {
			seen[r.Peer] = true
			out = append(out, r.Peer)
		}
	}
	rank := func(p string) int {
		if i := slices.Index(peerOrder, p); i >= 0 {
			return i
		}
		return len(peerOrder)
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	return out
}

// notDurable are the peers that acknowledge a wait before it would
// survive a crash (docs/BENCHMARKS.md).
var notDurable = map[string]bool{"asynq": true, "naive": true, "polling": true}

// palette gives each peer one color in every chart.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0x6b, 0xae, 0xd6, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff},
	{0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
}

func peerColor(peer string) color.Color {
	if i := slices.Index([]string{"vigild", "vigil", "river", "asynq", "polling", "naive"}, peer); i >= 0 {
		return palette[i]
	}
	var h uint32 = 2166136261
	for i := 0; i < len(peer); i++ {
		h = (h ^ uint32(peer[i])) * 16777619
	}
	return palette[6+int(h%uint32(len(palette)-6))]
}

// subtitle says where the runs of one chart came from: dates, commits,
// the host's load, how many runs.
func subtitle(rs []results.Run, files []*results.File) string {
	var first, last time.Time
	loads := []float64{}
	for _, r := range rs {
		if first.IsZero() || r.At.Before(first) {
			first = r.At
		}
		if r.At.After(last) {
			last = r.At
		}
		loads = append(loads, r.Load1)
	}
	commits := map[string]bool{}
	cpus := 0
	for _, f := range files {
		for _, r := range f.Runs {
			if r.Scenario == rs[0].Scenario {
				if f.Commit != "" {
					commits[f.Commit] = true
				}
				cpus = max(cpus, f.CPUs)
				break
			}
		}
	}
	var cs []string
	for c := range commits {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	// Runs per peer and label (files may hold more of the same).
	count := map[[2]string]int{}
	maxRun := 0
	for _, r := range rs {
		k := [2]string{r.Peer, r.Label}
		count[k]++
		maxRun = max(maxRun, count[k])
	}
	s := first.Format("2006-01-02 15:04")
	if !last.Equal(first) {
		s += "–" + last.Format("15:04") + " UTC"
	}
	if len(cs) > 0 {
		s += ", commit " + strings.Join(cs, ", ")
	}
	if cpus > 0 {
		s += fmt.Sprintf(", %d CPUs", cpus)
	}
	s += fmt.Sprintf(", load %s–%s", num(slices.Min(loads)), num(slices.Max(loads)))
	if maxRun == 1 {
		s += ", 1 run"
	} else {
		s += fmt.Sprintf(", %d runs", maxRun)
	}
	return s
}

func newPlot(title string, rs []results.Run, files []*results.File) *plot.Plot {
	p := plot.New()
	p.Title.Text = title + "\n" + subtitle(rs, files)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Title.Padding = vg.Points(6)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(10)
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	p.Add(g)
	return p
}

var countRE = regexp.MustCompile(`\bn=(\d+)\b`)

// labelsOf lists the distinct labels of rs, e.g. "n = 20 000".
func labelsOf(rs []results.Run) string {
	var ls []string
	for _, r := range rs {
		l := countRE.ReplaceAllStringFunc(r.Label, func(m string) string {
			v, _ := strconv.ParseFloat(m[2:], 64)
			return "n = " + num(v)
		})
		if !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	return strings.Join(ls, ", ")
}

// lateness: a box plot of each peer's waits' lateness, every run pooled.
func lateness(rs *runs, scenario, title string) (*plot.Plot, error) {
	all := rs.byScenario[scenario]
	var withLate []results.Run
	for _, r := range all {
		if r.Lateness != nil {
			withLate = append(withLate, r)
		}
	}
	if len(withLate) == 0 {
		return nil, nil
	}
	p := newPlot(title+", "+labelsOf(withLate)+":\nms after each wait's instant (below 0: early; log scale beyond ±1 ms)", withLate, rs.files)
	peers := peersOf(withLate)
	scale := symlog{c: 1}
	p.Y.Scale, p.Y.Tick.Marker = scale, scale
	w := vg.Length(float64(chartW) * 0.6 / float64(len(peers)+1))
	w = min(w, vg.Points(40))
	var names []string
	for i, peer := range peers {
		var vs plotter.Values
		n := 0
		for _, r := range withLate {
			if r.Peer == peer {
				vs = append(vs, r.Lateness.Q...)
				n += r.Lateness.N
			}
		}
		b, err := plotter.NewBoxPlot(w, float64(i), vs)
		if err != nil {
			return nil, err
		}
		b.FillColor = withAlpha(peerColor(peer), 0x80)
		b.GlyphStyle.Radius = vg.Points(1)
		b.GlyphStyle.Color = peerColor(peer)
		p.Add(b)
		names = append(names, fmt.Sprintf("%s\np50 %s\np99 %s", peer, msText(quantile(vs, 0.5)), msText(quantile(vs, 0.99))))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(peers))-0.5
	zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(peers)) - 0.5, Y: 0}})
	if err != nil {
		return nil, err
	}
	zero.Color = color.Gray{0x40}
	zero.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(zero)
	p.Legend.Add("the wait's own instant", zero)
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = math.Min(p.Y.Min, 0)
	return p, nil
}

// drain: settled waits against seconds since the instant, a line per peer,
// from the run with the median "all settled" of each.
func drain(rs *runs) (*plot.Plot, error) {
	var withLate []results.Run
	for _, r := range rs.byScenario["storm"] {
		if r.Lateness != nil {
			withLate = append(withLate, r)
		}
	}
	if len(withLate) == 0 {
		return nil, nil
	}
	p := newPlot("Storm: waits settled after the instant they were all due, "+labelsOf(withLate), withLate, rs.files)
	p.X.Label.Text = "seconds after the instant"
	p.Y.Label.Text = "waits settled"
	p.Y.Tick.Marker = grouped{}
	for _, peer := range peersOf(withLate) {
		var mine []results.Run
		for _, r := range withLate {
			if r.Peer == peer {
				mine = append(mine, r)
			}
		}
		slices.SortFunc(mine, func(a, b results.Run) int { return cmp.Compare(drained(a), drained(b)) })
		d := mine[len(mine)/2].Lateness
		xys := make(plotter.XYs, 0, len(d.Q)+1)
		xys = append(xys, plotter.XY{X: d.Q[0] / 1000, Y: 0})
		for i, q := range d.Q {
			xys = append(xys, plotter.XY{X: q / 1000, Y: d.Count(i)})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = peerColor(peer)
		l.Width = vg.Points(1.6)
		p.Add(l)
		// "all settled" as the tables give it where the run has it (for
		// vigild the client saw every commit; its per-wait instants are
		// stamped before the commit), else the last settlement.
		all, ok := mine[len(mine)/2].Values["all_settled_ms"]
		if !ok {
			all = d.Q[len(d.Q)-1]
		}
		p.Legend.Add(fmt.Sprintf("%s: all %s in %s", peer, num(float64(d.N)), msText(all)), l)
	}
	// Top, a third of the way in: the fast peers' lines rise near 0 and
	// the slow ones' reach the top at the right.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = chartW / 3
	p.X.Min = math.Min(p.X.Min, 0)
	p.Y.Min = 0
	return p, nil
}

// drained is when a storm run's last wait settled, as its figures say.
func drained(r results.Run) float64 {
	if v, ok := r.Values["all_settled_ms"]; ok {
		return v
	}
	return r.Lateness.Q[len(r.Lateness.Q)-1]
}

var concRE = regexp.MustCompile(`\bconc=(\d+)\b`)

// register: registrations per second, a bar per peer and client count.
func register(rs *runs) (*plot.Plot, error) {
	all := rs.byScenario["register"]
	if len(all) == 0 {
		return nil, nil
	}
	series := func(label string) string {
		m := concRE.FindStringSubmatch(label)
		if m == nil {
			return label
		}
		if m[1] == "1" {
			return "1 client"
		}
		return m[1] + " clients"
	}
	return bars(rs, all, barSpec{title: "Registrations per second, durable where the peer is (log scale)", key: "per_s",
		seriesOf: series, format: num})
}

// batch: waits per second registered in batches, a bar per peer.
func batch(rs *runs) (*plot.Plot, error) {
	all := rs.byScenario["batch"]
	if len(all) == 0 {
		return nil, nil
	}
	return bars(rs, all, barSpec{title: "Waits per second registered in batches from one client (log scale)", key: "per_s",
		seriesOf: func(l string) string { return l }, format: num})
}

// idle: CPU per minute with every wait pending and none due, a bar per
// peer; the threads' schedstat where the run has it (ns), else the
// 10 ms ticks.
func idle(rs *runs) (*plot.Plot, error) {
	all := rs.byScenario["idle"]
	if len(all) == 0 {
		return nil, nil
	}
	key := "cpu_ms_per_min"
	how := "utime+stime in 10 ms ticks"
	if _, ok := all[0].Values["cpu_ms_per_min_schedstat"]; ok {
		key, how = "cpu_ms_per_min_schedstat", "the threads' run time from schedstat"
	}
	return bars(rs, all, barSpec{title: "Idle: CPU per minute of every process involved, waits pending and none due\n(" + how + "; log scale)", key: key,
		seriesOf: func(l string) string { return l }, format: msText,
		// How many processes a bar sums: every PostgreSQL process for
		// River, whatever else they serve at the time.
		note: func(rs []results.Run) string {
			n := int(rs[len(rs)/2].Values["processes_measured"])
			if n == 1 {
				return "1 process"
			}
			return fmt.Sprintf("%d processes", n)
		}})
}

// barSpec says what a bar chart shows.
type barSpec struct {
	title    string
	key      string                    // the figure each bar is the median of
	seriesOf func(label string) string // a run's series, one bar per peer each
	format   func(float64) string
	// note, if set, adds a line under a bar's value from its runs.
	note func([]results.Run) string
}

// bars draws the median of key per peer (categories) and series (one bar
// each, side by side), each bar labelled with its value, on a log scale.
func bars(rs *runs, all []results.Run, spec barSpec) (*plot.Plot, error) {
	key, seriesOf, format := spec.key, spec.seriesOf, spec.format
	var have []results.Run
	for _, r := range all {
		if _, ok := r.Values[key]; ok {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil, nil
	}
	var series []string
	for _, r := range have {
		if s := seriesOf(r.Label); !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	title := spec.title
	if len(series) == 1 {
		title = strings.Replace(title, "\n", ", "+labelsOf(have)+"\n", 1)
		if !strings.Contains(spec.title, "\n") {
			title += ", " + labelsOf(have)
		}
	}
	p := newPlot(title, have, rs.files)
	// No axis label: gonum places it at the data range's arithmetic
	// middle, far from the middle on a log scale, and pads for it there.
	scale := symlog{c: 1}
	p.Y.Scale, p.Y.Tick.Marker = scale, scale
	peers := peersOf(have)
	plotW := float64(chartW) * 0.8
	w := vg.Length(plotW * 0.75 / float64(len(peers)*len(series)))
	shades := []uint8{0xff, 0x90, 0x50, 0x30}
	lowest := math.Inf(1)
	maxLines := 1
	for si, s := range series {
		vals := make(plotter.Values, len(peers))
		var pts plotter.XYs
		var texts []string
		for pi, peer := range peers {
			var vs []float64
			var mine []results.Run
			for _, r := range have {
				if r.Peer == peer && seriesOf(r.Label) == s {
					vs = append(vs, r.Values[key])
					mine = append(mine, r)
				}
			}
			if len(vs) == 0 {
				continue
			}
			slices.Sort(vs)
			vals[pi] = vs[len(vs)/2]
			lowest = min(lowest, vals[pi])
			pts = append(pts, plotter.XY{X: float64(pi), Y: vals[pi]})
			t := format(vals[pi])
			if len(vs) > 1 {
				t += "\n[" + short(vs[0]) + "–" + short(vs[len(vs)-1]) + "]"
			}
			if spec.note != nil {
				t += "\n" + spec.note(mine)
			}
			maxLines = max(maxLines, 1+strings.Count(t, "\n"))
			texts = append(texts, t)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Offset = vg.Length(float64(si)-float64(len(series)-1)/2) * w
		b.LineStyle.Width = 0
		base := palette[0]
		if len(series) == 1 {
			b.Color = base
		} else {
			b.Color = withAlpha(base, shades[min(si, len(shades)-1)])
		}
		p.Add(b)
		if len(series) > 1 {
			p.Legend.Add(s, b)
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: texts})
		if err != nil {
			return nil, err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(7.5)
			labels.TextStyle[i].XAlign = text.XCenter
			labels.TextStyle[i].YAlign = text.YBottom
		}
		labels.Offset = vg.Point{X: b.Offset, Y: vg.Points(2)}
		p.Add(labels)
	}
	names := make([]string, len(peers))
	for i, peer := range peers {
		names[i] = peer
		if notDurable[peer] {
			names[i] += "\n(not durable)"
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(peers))-0.5
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(6)
	p.Y.Min = 0
	if lowest >= 100 {
		// Start two decades below the lowest bar rather than at 0 (the
		// bars are clipped there): the decades near 0 say nothing here.
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(lowest))-1)
	}
	// Room above the tallest bar for its label (about a third of a
	// decade a line).
	p.Y.Max = math.Max(p.Y.Max, 1) * math.Pow(10, 0.3*float64(maxLines))
	return p, nil
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	// premultiplied, as color.RGBA wants
	return color.RGBA{uint8(r >> 8 * uint32(a) / 0xff), uint8(g >> 8 * uint32(a) / 0xff), uint8(b >> 8 * uint32(a) / 0xff), a}
}

func quantile(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// msText is a duration in ms as a person reads it: "0.83 ms", "1 059 ms",
// "20.9 s".
func msText(v float64) string {
	switch a := math.Abs(v); {
	case a >= 10_000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	case a >= 10:
		return num(math.Round(v)) + " ms"
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	}
}

// short is a value in three significant figures at most, with k and M:
// for a bar's range, where the full figures would overlap.
func short(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 2, 64) + "k"
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// num groups thousands with a space, as the docs' tables do; fractions
// keep two significant figures.
func num(v float64) string {
	if math.Abs(v) < 10 && v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	s := strconv.FormatInt(int64(math.Round(math.Abs(v))), 10)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// grouped is gonum's default ticks labelled as num writes them.
type grouped struct{}

// Ticks implements plot.Ticker.
func (grouped) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = num(ts[i].Value)
		}
	}
	return ts
}

// symlog is a scale logarithmic beyond ±c and linear within, so one axis
// shows 0, negative values (a wait settled early) and five decades:
// f(x) = sign(x)·log10(1 + |x|/c).
type symlog struct{ c float64 }

func (s symlog) f(x float64) float64 { return math.Copysign(math.Log10(1+math.Abs(x)/s.c), x) }

// Normalize implements plot.Normalizer.
func (s symlog) Normalize(lo, hi, x float64) float64 {
	a, b := s.f(lo), s.f(hi)
	if a == b {
		return 0.5
	}
	return (s.f(x) - a) / (b - a)
}

// Ticks implements plot.Ticker: 0, ±c·10^k labelled, ±c·m·10^k minor.
func (s symlog) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	in := func(v float64) bool { return v >= lo && v <= hi }
	if in(0) {
		ts = append(ts, plot.Tick{Value: 0, Label: "0"})
	}
	for k := 0; k <= 12; k++ {
		d := s.c * math.Pow(10, float64(k))
		if d > math.Max(math.Abs(lo), math.Abs(hi)) {
			break
		}
		for m := 1; m <= 9; m++ {
			for _, sign := range []float64{1, -1} {
				v := sign * float64(m) * d
				if !in(v) {
					continue
				}
				t := plot.Tick{Value: v}
				if m == 1 {
					t.Label = num(v)
				}
				ts = append(ts, t)
			}
		}
	}
	if len(ts) < 2 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ts
}
