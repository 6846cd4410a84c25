package charts

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// svgTexts parses an SVG file as XML, failing the test if it is not
// well-formed or not an <svg> document, and returns its <text> contents.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	var root string
	depth, inText := 0, false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = tok.Name.Local
			}
			depth++
			inText = tok.Name.Local == "text"
			if inText {
				texts = append(texts, "")
			}
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	if root != "svg" || depth != 0 {
		t.Fatalf("%s: root element %q, depth at the end %d; want a closed <svg>", path, root, depth)
	}
	return texts
}

func TestRenderFixture(t *testing.T) {
	out := t.TempDir()
	written, err := Render("testdata/results", out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lateness-spread.svg", "lateness-storm.svg", "storm-drain.svg", "register.svg", "idle-cpu.svg"}
	var got []string
	for _, w := range written {
		got = append(got, filepath.Base(w))
	}
	// The fixture has no batch scenario, so no batch chart.
	if !slices.Equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	// What each chart must name: its series (a legend entry or a
	// category per peer) and the figures it labels.
	names := map[string][]string{
		"lateness-spread.svg": {"vigild", "river", "asynq", "the wait's own instant", "p50 1.0 ms\np99 2.0 ms", "commit fixture"},
		"lateness-storm.svg":  {"vigild", "river", "asynq", "n = 1 000"},
		"storm-drain.svg":     {"vigild: all 1 000 in 980 ms", "river: all 1 000 in 20.1 s", "asynq: all 1 000 in 2 900 ms", "seconds after the instant", "waits settled"},
		"register.svg":        {"vigild", "river", "asynq", "(not durable)", "32 clients", "1 client", "6 056", "66 197", "1 166"},
		"idle-cpu.svg":        {"vigild", "river", "asynq", "7.7 ms", "431 ms", "schedstat"},
	}
	for file, must := range names {
		raw, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif")) {
			t.Errorf("%s: text without a fallback for viewers lacking Liberation Sans", file)
		}
		texts := strings.Join(svgTexts(t, filepath.Join(out, file)), "\n")
		for _, s := range must {
			if !strings.Contains(texts, s) {
				t.Errorf("%s: no text %q in\n%s", file, s, texts)
			}
		}
	}
}

// The same results give the same bytes: charts regenerated from
// unchanged results do not show as changed in git.
func TestRenderDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if _, err := Render("testdata/results", dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"register.svg", "storm-drain.svg", "lateness-spread.svg"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two renderings of the same results", f)
		}
	}
}

func TestRenderRefusesBadResults(t *testing.T) {
	good, err := os.ReadFile("testdata/results/fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ from, to, want string }{
		"wrong format":        {`"vigil-bench-results/1"`, `"something-else/9"`, "format"},
		"lateness descending": {`[8,120,250,400,520,700,860,975]`, `[8,120,250,40,520,700,860,975]`, "ascending"},
		"more points than n":  {`{"n":1000,"q":[0,0,1,1,1,1,1,2]}`, `{"n":3,"q":[0,0,1,1,1,1,1,2]}`, "points of 3 samples"},
		"empty peer":          {`"peer":"asynq","label":"n=100000"`, `"peer":"","label":"n=100000"`, "scenario, peer and label"},
		"not JSON":            {`{"format"`, `{format`, "invalid character"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(string(good), c.from, c.to, 1)
			if bad == string(good) {
				t.Fatalf("fixture has no %q", c.from)
			}
			in := t.TempDir()
			if err := os.WriteFile(filepath.Join(in, "bad.json"), []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			written, err := Render(in, out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("render = %v, want an error with %q", err, c.want)
			}
			if len(written) != 0 {
				t.Fatalf("wrote %v from refused results", written)
			}
		})
	}
}
