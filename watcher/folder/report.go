package folder

import (
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

// clipReserve is the room kept at the end of a clipped report for the
// note that says what was cut.
const clipReserve = 240

// report is one settled burst, written up.
type report struct {
	line                   string // "1 added, 2 edited, 1 removed"
	text                   string // line, notes and diffs, clipped
	cut                    []string
	added, edited, removed []string
}

// countLine words the counts: "1 added, 2 edited, 1 removed", leaving out
// the zeros.
func countLine(added, edited, removed int) string {
	var parts []string
	for _, p := range []struct {
		n    int
		verb string
	}{{added, "added"}, {edited, "edited"}, {removed, "removed"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.verb))
		}
	}
	return strings.Join(parts, ", ")
}

// writeReport reads what changed, keeps the new contents for the next
// diff, and writes the report. It may update snap's entries for files
// that changed again since the walk (their diff shows what was read).
func (w *Watcher) writeReport(id string, s *spec, snap *snapshot, changes []change, keep map[string]bool) *report {
	r := &report{}
	for _, c := range changes {
		switch c.op {
		case "added":
			r.added = append(r.added, c.rel)
		case "edited":
			r.edited = append(r.edited, c.rel)
		case "removed":
			r.removed = append(r.removed, c.rel)
		}
	}
	r.line = countLine(len(r.added), len(r.edited), len(r.removed))

	var head strings.Builder
	head.WriteString(r.line + "\n")
	if snap.truncated {
		fmt.Fprintf(&head, "(%s)\n", truncationNote(s, snap.frontier))
	}
	if len(snap.notFollowed) > 0 {
		fmt.Fprintf(&head, "(not followed, as they point outside the allowed roots: %s)\n", nameList(snap.notFollowed, 200))
	}
	head.WriteString("\n")

	limit := s.ReportMaxChars
	var b strings.Builder
	b.WriteString(head.String())
	budgetLeft := func() int { return limit - clipReserve - b.Len() }
	for _, c := range changes {
		sec := w.section(id, s, snap, c, keep, budgetLeft() > 0)
		switch room := budgetLeft(); {
		case len(r.cut) > 0, room <= 0:
			r.cut = append(r.cut, c.rel)
		case len(sec) <= room:
			b.WriteString(sec)
		case room >= 160:
			cutAt := strings.LastIndexByte(sec[:room-60], '\n')
			if cutAt < 0 {
				cutAt = room - 60
			}
			b.WriteString(sec[:cutAt+1])
			fmt.Fprintf(&b, "… (the rest of the diff of %s is cut)\n", c.rel)
			r.cut = append(r.cut, c.rel)
		default:
			r.cut = append(r.cut, c.rel)
		}
	}
	if len(r.cut) > 0 {
		fmt.Fprintf(&b, "\n[report clipped at %d characters (report_max_chars); cut: %s]\n", limit, nameList(r.cut, 150))
	}
	r.text = b.String()
	if len(r.text) > limit {
		r.text = strings.ToValidUTF8(r.text[:limit], "")
	}
	return r
}

// section writes the report of one change. It always reads and keeps
// the new content of a text file (the next diff needs it); it diffs only
// when diff is true (the report has room left).
func (w *Watcher) section(id string, s *spec, snap *snapshot, c change, keep map[string]bool, diff bool) string {
	var cur []byte
	curOK := false
	if c.op != "removed" && c.cur.kind == kindText {
		cur, curOK = w.newContent(id, snap, c.rel, keep)
		if !curOK {
			return fmt.Sprintf("%s %s (it changed again while this report was made; the next report shows it)\n", c.rel, c.op)
		}
	}
	kindOf := func(e entry) byte { return e.kind }
	switch {
	case c.op == "added" && c.cur.kind == kindText:
		if !diff {
			return ""
		}
		return udiff.Unified("/dev/null", "b/"+c.rel, "", string(cur))
	case c.op == "added" && c.cur.kind == kindBinary:
		return fmt.Sprintf("Binary file %s added (%s)\n", c.rel, size(c.cur.size))
	case c.op == "added":
		return fmt.Sprintf("%s added (%s; larger than max_file_bytes or unreadable, so not shown)\n", c.rel, size(c.cur.size))
	case c.op == "removed" && c.old.kind == kindText:
		old, ok := w.blobs.get(id, c.old.hash, s.MaxFileBytes)
		if !ok {
			return fmt.Sprintf("%s removed (%s; its content was not kept)\n", c.rel, size(c.old.size))
		}
		if !diff {
			return ""
		}
		return udiff.Unified("a/"+c.rel, "/dev/null", string(old), "")
	case c.op == "removed" && c.old.kind == kindBinary:
		return fmt.Sprintf("Binary file %s removed (%s)\n", c.rel, size(c.old.size))
	case c.op == "removed":
		return fmt.Sprintf("%s removed (%s)\n", c.rel, size(c.old.size))
	case kindOf(c.old) == kindSize || kindOf(c.cur) == kindSize:
		return fmt.Sprintf("%s edited: %s → %s (larger than max_file_bytes or unreadable: tracked by size and modification time, not diffed)\n",
			c.rel, size(c.old.size), size(c.cur.size))
	case kindOf(c.old) == kindBinary || kindOf(c.cur) == kindBinary:
		return fmt.Sprintf("Binary file %s edited (%s → %s)\n", c.rel, size(c.old.size), size(c.cur.size))
	}
	old, ok := w.blobs.get(id, c.old.hash, s.MaxFileBytes)
	if !ok {
		return fmt.Sprintf("%s edited (%s → %s; its previous content was not kept, so there is no diff)\n", c.rel, size(c.old.size), size(c.cur.size))
	}
	if !diff {
		return ""
	}
	return udiff.Unified("a/"+c.rel, "b/"+c.rel, string(old), string(cur))
}

// newContent returns the content of a changed text file as of the walk,
// keeping it for the next diff when keep names its hash. A file the walk
// did not hold in memory is read again; if it changed since, false.
func (w *Watcher) newContent(id string, snap *snapshot, rel string, keep map[string]bool) ([]byte, bool) {
	e := snap.files[rel]
	data, ok := snap.content[rel]
	if !ok {
		d, _, err := readFile(snap.real[rel], e.size)
		if err != nil || hashOf(d) != e.hash {
			return nil, false
		}
		data = d
	}
	if keep[e.hash] {
		_ = w.blobs.put(id, e.hash, data)
	}
	return data, true
}

// truncationNote says where a look stopped and why: what lies from
// frontier on is not watched.
func truncationNote(s *spec, frontier string) string {
	if frontier == "" {
		return fmt.Sprintf("the folder holds more than the %d entries a look reads: nothing in it is watched", visitLimit(s.MaxFiles))
	}
	return fmt.Sprintf("files from %s on are not watched: a look tracks at most %d files (max_files) and reads at most %d entries",
		frontier, s.MaxFiles, visitLimit(s.MaxFiles))
}

// nameList joins names, clipped to about max bytes with a count of the rest.
func nameList(names []string, max int) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 && b.Len()+len(n) > max {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
	}
	return b.String()
}

// size words a byte count: "12 B", "3.4 KiB", "2.0 MiB".
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
