package mcpserver

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
)

// TestChannelContentBounded checks a message's content is clipped to
// channelContentBytes on a rune boundary, and its meta has only plain
// identifier keys with string values, none empty.
func TestChannelContentBounded(t *testing.T) {
	t.Parallel()
	c := &channel{recipient: "r"}
	long := strings.Repeat("é", 150) // 300 bytes a line: each line is clipped to 200
	body := strings.Repeat(long+"\n", 20)
	p := c.message(&vigil.Message{Seq: 7, Recipient: "r", Type: vigil.MessageNote, Text: strings.Repeat("ü", 900),
		Data: []byte(`{"title":"t","body":` + strconv.Quote(body) + `}`)})
	if len(p.Content) > channelContentBytes || !utf8.ValidString(p.Content) || !strings.HasSuffix(p.Content, "…") {
		t.Errorf("content is %d bytes (valid UTF-8: %v), want at most %d, clipped with …", len(p.Content), utf8.ValidString(p.Content), channelContentBytes)
	}
	want := map[string]string{"event": "message", "type": "note", "seq": "7", "recipient": "r"}
	if len(p.Meta) != len(want) {
		t.Errorf("meta = %v, want %v", p.Meta, want)
	}
	for k, v := range want {
		if p.Meta[k] != v {
			t.Errorf("meta[%s] = %q, want %q", k, p.Meta[k], v)
		}
	}
	if got := clipBytes("abc", 3); got != "abc" {
		t.Errorf("clipBytes at the bound = %q", got)
	}
}
