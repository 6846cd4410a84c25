package wording_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

func TestDetail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", wording.DetailLineBytes+50)
	for _, tc := range []struct {
		name string
		m    vigil.Message
		want []string
	}{
		{"note body, first lines", vigil.Message{Type: vigil.MessageNote, Text: "t",
			Data: []byte(`{"title":"t","body":"one\n\ntwo\nthree\nfour"}`)}, []string{"one", "two", "three"}},
		{"note without body", vigil.Message{Type: vigil.MessageNote, Text: "t", Data: []byte(`{"title":"t"}`)}, nil},
		{"folder report and review", vigil.Message{Type: vigil.MessageChanged, WatchID: "w",
			Data: []byte(`{"observation":{"summary":"s","facts":{"report":{"summary":"2 edited: a.go, b.go","review":{"output":"LGTM\nbut check b.go\nmore\nmore"}}}}}`)},
			[]string{"report: 2 edited: a.go, b.go", "review: LGTM", "but check b.go"}},
		{"folder outcome with a review error", vigil.Message{Type: vigil.MessageFired, WatchID: "w",
			Data: []byte(`{"outcome":{"observation":{"facts":{"report":{"summary":"1 added: c","review":{"error":"the reviewer timed out"}}}}}}`)},
			[]string{"report: 1 added: c", "review: the reviewer timed out"}},
		{"failed command, stderr tail", vigil.Message{Type: vigil.MessageFailed, WatchID: "w", Text: "make check failed.",
			Data: []byte(`{"outcome":{"observation":{"summary":"exit 2","facts":{"stderr":"a\nb\nc\nFAIL: TestX\n","stdout":"ok"}}}}`)},
			[]string{"b", "c", "FAIL: TestX"}},
		{"errored, the check's reason", vigil.Message{Type: vigil.MessageErrored, WatchID: "w", Text: "gave up.",
			Data: []byte(`{"outcome":{"observation":{"reason":"connection refused"}}}`)}, []string{"connection refused"}},
		{"reason already in the sentence", vigil.Message{Type: vigil.MessageErrored, WatchID: "w", Text: "gave up: connection refused.",
			Data: []byte(`{"outcome":{"observation":{"reason":"connection refused"}}}`)}, nil},
		{"fired timer: nothing more", vigil.Message{Type: vigil.MessageFired, WatchID: "w", Text: "went off.",
			Data: []byte(`{"outcome":{"observation":{"summary":"due"}}}`)}, nil},
		{"clipped line", vigil.Message{Type: vigil.MessageNote, Data: []byte(`{"body":"` + long + `"}`)},
			[]string{long[:wording.DetailLineBytes] + "…"}},
		{"bad data", vigil.Message{Type: vigil.MessageNote, Data: []byte(`[`)}, nil},
	} {
		if diff := cmp.Diff(tc.want, wording.Detail(&tc.m, 3)); diff != "" {
			t.Errorf("%s: Detail (-want +got):\n%s", tc.name, diff)
		}
	}
}
