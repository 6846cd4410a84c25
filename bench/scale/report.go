package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table is one scenario's output: a title, a header, rows and notes.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *table) print() {
	fmt.Printf("\n== %s\n", t.title)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(w, strings.Join(t.head, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(w, strings.Join(r, "\t")+"\t")
	}
	w.Flush()
	for _, n := range t.notes {
		fmt.Printf("  * %s\n", n)
	}
}

// count spells n with thin groups: 1 000 000.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// perWatch is bytes per watch, whole.
func perWatch(b int64, n int) string { return fmt.Sprintf("%.0f B", float64(b)/float64(n)) }

// msec prints a duration in milliseconds, 3 significant digits at least.
func msec(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100 || v <= -100:
		return count(int64(v+0.5)) + " ms"
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// median returns the median and range of vs (not modified).
func median[T int64 | time.Duration | float64](vs []T) (med, lo, hi T) {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

// withRange prints a median with its range when there was more than one run.
func withRange[T int64 | time.Duration | float64](vs []T, f func(T) string) string {
	med, lo, hi := median(vs)
	if len(vs) == 1 {
		return f(med)
	}
	return fmt.Sprintf("%s [%s – %s]", f(med), f(lo), f(hi))
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
