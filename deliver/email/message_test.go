package email_test

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
)

// onTheWire returns the SMTP DATA stream net/smtp writes for msg: lines
// starting with a dot escaped, ended by "<CRLF>.<CRLF>".
func onTheWire(t *testing.T, msg []byte) string {
	t.Helper()
	var wire bytes.Buffer
	bw := bufio.NewWriter(&wire)
	dw := textproto.NewWriter(bw).DotWriter()
	if _, err := dw.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := dw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return wire.String()
}

// checkWire fails the test for a CR or LF that is not part of a CRLF, for
// an end of data before the end, and for a line longer than SMTP's limit.
func checkWire(t *testing.T, wire string) {
	t.Helper()
	if i := strings.Index(wire, "\r\n.\r\n"); i != len(wire)-5 {
		t.Errorf("the data ends at %d of %d bytes", i, len(wire))
	}
	for i := 0; i < len(wire); i++ {
		switch {
		case wire[i] == '\r' && (i+1 == len(wire) || wire[i+1] != '\n'):
			t.Errorf("a bare CR at %d: %q", i, wire[max(0, i-20):min(len(wire), i+20)])
		case wire[i] == '\n' && (i == 0 || wire[i-1] != '\r'):
			t.Errorf("a bare LF at %d: %q", i, wire[max(0, i-20):min(len(wire), i+20)])
		case wire[i] < ' ' && wire[i] != '\r' && wire[i] != '\n' && wire[i] != '\t':
			t.Errorf("the control character %#x at %d", wire[i], i)
		}
	}
	for i, line := range strings.Split(wire, "\r\n") {
		if len(strings.TrimPrefix(line, ".")) > 998 {
			t.Errorf("line %d is %d octets, more than SMTP's 998", i, len(line))
		}
	}
}

func delivery(sentence, note string, facts map[string]any) *deliver.Delivery {
	w := &vigil.Watch{ID: "01JD3M2A7X2B1NQ8K0W3G5H6FD", Kind: vigil.KindHTTP, Recipient: "agent-7", State: vigil.StateFired, Note: note,
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: sentence,
			Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 200", Facts: facts}},
		SettledAt: time.Now()}
	return &deliver.Delivery{Watch: w, MessageID: "m1", Now: time.Now()}
}

// TestMessageLineBreaksFromOutside: a note or a sentence holding a bare CR
// before a dot cannot end the SMTP data early (SMTP smuggling: some
// servers take "<CR>.<CR><LF>" for the end), nor add a header: every line
// break of outside text is the mail's own CRLF, other control characters
// are dropped, and the text stays in the body, a dot line escaped.
func TestMessageLineBreaksFromOutside(t *testing.T) {
	t.Parallel()
	note := "hi\r.\nMAIL FROM:<ceo@corp.example>\r\nRCPT TO:<victim@example.org>\rDATA\n\x00From: ceo@corp.example\x1b\n\nwire money\r."
	sentence := "it fired\r\nBcc: victim@example.org\r.\r\n\x07done"
	msg := email.Message("vigil@relay", "ops@example.com", "", delivery(sentence, note, map[string]any{"title": "a\r.\r\nb"}))
	wire := onTheWire(t, msg)
	checkWire(t, wire)
	if !strings.Contains(wire, "\r\nNote: hi\r\n..\r\nMAIL FROM:<ceo@corp.example>\r\nRCPT TO:<victim@example.org>\r\nDATA\r\nFrom: ceo@corp.example\r\n\r\nwire money\r\n..\r\n") {
		t.Errorf("the note is not in the body line by line, its dots escaped:\n%s", wire)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(string(msg)))
	if err != nil {
		t.Fatal(err)
	}
	if got := parsed.Header.Get("Bcc"); got != "" {
		t.Errorf("the sentence added the header Bcc: %q", got)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
	if want := "it fired Bcc: victim@example.org . done"; err != nil || subject != want {
		t.Errorf("Subject = %q (%v), want %q", subject, err, want)
	}
}

// TestMessageLongLines: a subject longer than a line is folded (a long
// URL, with no space to fold at, as encoded-words), and a body line longer
// than SMTP's 998 octets makes the body quoted-printable: no line on the
// wire is too long for a server, and each reads back as it was; a mail
// with short lines stays 8bit.
func TestMessageLongLines(t *testing.T) {
	t.Parallel()
	url := "https://ci.example/" + strings.Repeat("a/b-c_d?e=f&", 150)
	words := strings.TrimSpace(strings.Repeat("the quick brown fox jumps over the lazy dog ", 50))
	long := strings.Repeat("é and x ", 200) + url
	for _, tt := range []struct {
		name, sentence, note string
		qp                   bool
	}{
		{"short", "db:5432 accepts connections — “ready” at last.", "merge PR 41", false},
		{"long URL", url + " answered 200.", "", true},
		{"long sentence", words, "", true},
		{"long non-ASCII sentence", long, "", true},
		{"long note line", "it fired", "see " + url, true},
	} {
		msg := email.Message("vigil@relay", "ops@example.com", "https://vigil.example/u/01JD?t=abc", delivery(tt.sentence, tt.note, map[string]any{"n": 1}))
		checkWire(t, onTheWire(t, msg))
		head, _, _ := strings.Cut(string(msg), "\r\n\r\n")
		for line := range strings.SplitSeq(head, "\r\n") {
			if len(line) > 78+len("Subject: ") {
				t.Errorf("%s: header line of %d characters: %.100q…", tt.name, len(line), line)
			}
		}
		parsed, err := mail.ReadMessage(strings.NewReader(string(msg)))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil || subject != tt.sentence {
			t.Errorf("%s: Subject = %.100q… (%v), want %.100q…", tt.name, subject, err, tt.sentence)
		}
		var body io.Reader = parsed.Body
		if cte := parsed.Header.Get("Content-Transfer-Encoding"); cte != map[bool]string{false: "8bit", true: "quoted-printable"}[tt.qp] {
			t.Errorf("%s: Content-Transfer-Encoding %s", tt.name, cte)
		} else if tt.qp {
			body = quotedprintable.NewReader(body)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		text := strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
		if !strings.HasPrefix(text, tt.sentence+"\n\nHTTP 200\n") || !strings.Contains(text, "\nNote: "+tt.note+"\n") && tt.note != "" ||
			!strings.HasSuffix(text, "\nTo get no more email about this watch: https://vigil.example/u/01JD?t=abc") {
			t.Errorf("%s: body reads back as %.300q…", tt.name, text)
		}
	}
}
