package wording

import (
	"encoding/json"
	"strings"

	"github.com/vigil-run/vigil"
)

// DetailLineBytes bounds each line Detail returns.
const DetailLineBytes = 200

// Detail returns what a mailbox message carries besides its sentence, in
// at most maxLines lines of at most DetailLineBytes each (clipped): a
// note's body (its first lines), a folder report's summary line and the
// first lines of its review, or, for a watch that failed, errored or
// expired, a short excerpt of why (the last lines of a command's stderr or
// stdout, else what the last check saw). Nothing else: the sentence says
// the rest. The lines are the text the watcher or the note's author wrote,
// with control and bidi characters spelled visibly (vigil.PlainText); a
// surface that prints them escapes them for its medium.
func Detail(m *vigil.Message, maxLines int) []string {
	if m == nil || maxLines <= 0 || len(m.Data) == 0 {
		return nil
	}
	var d struct {
		Title   string `json:"title"`
		Body    string `json:"body"`
		Outcome *struct {
			Observation *detailObs `json:"observation"`
		} `json:"outcome"`
		Observation *detailObs `json:"observation"`
	}
	if json.Unmarshal(m.Data, &d) != nil {
		return nil
	}
	if m.Type == vigil.MessageNote && m.WatchID == "" {
		return firstLines(d.Body, maxLines)
	}
	obs := d.Observation
	if d.Outcome != nil && d.Outcome.Observation != nil {
		obs = d.Outcome.Observation
	}
	if obs == nil {
		return nil
	}
	if rep, ok := obs.Facts["report"].(map[string]any); ok {
		var out []string
		if s, _ := rep["summary"].(string); s != "" {
			out = append(out, clip("report: "+s, DetailLineBytes))
		}
		if rv, ok := rep["review"].(map[string]any); ok {
			if e, _ := rv["error"].(string); e != "" {
				out = append(out, clip("review: "+e, DetailLineBytes))
			}
			if o, _ := rv["output"].(string); o != "" {
				for i, l := range firstLines(o, maxLines) {
					if i == 0 {
						l = clip("review: "+l, DetailLineBytes)
					}
					out = append(out, l)
				}
			}
		}
		return out[:min(len(out), maxLines)]
	}
	switch m.Type {
	case vigil.MessageFailed, vigil.MessageErrored, vigil.MessageExpired:
	default:
		return nil
	}
	for _, k := range []string{"stderr", "stdout"} {
		if s, _ := obs.Facts[k].(string); strings.TrimSpace(s) != "" {
			return lastLines(s, maxLines)
		}
	}
	for _, s := range []string{obs.Summary, obs.Reason} {
		if s = clip(s, DetailLineBytes); s != "" && !strings.Contains(m.Text, strings.TrimSuffix(s, "…")) {
			return []string{s}
		}
	}
	return nil
}

// detailObs is the part of an observation Detail reads.
type detailObs struct {
	Summary string         `json:"summary"`
	Reason  string         `json:"reason"`
	Facts   map[string]any `json:"facts"`
}

// firstLines returns the first n non-blank lines of s, each clipped.
func firstLines(s string, n int) []string {
	var out []string
	for l := range strings.Lines(s) {
		if len(out) == n {
			break
		}
		if l = clip(l, DetailLineBytes); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// lastLines returns the last n non-blank lines of s, each clipped.
func lastLines(s string, n int) []string {
	var out []string
	ls := strings.Split(s, "\n")
	for i := len(ls) - 1; i >= 0 && len(out) < n; i-- {
		if l := clip(ls[i], DetailLineBytes); l != "" {
			out = append(out, l)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
