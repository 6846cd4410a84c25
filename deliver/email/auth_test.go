package email_test

import (
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/store/memstore"
)

// sendTo makes one attempt of a fired watch's mail through the server on
// port, with cfg's other settings.
func sendTo(t *testing.T, port int, cfg email.Config) (bool, error) {
	t.Helper()
	st := memstore.New()
	w, m := settled(t, st, "w1", vigil.StateFired, "db:5432 accepts connections.")
	p, _ := json.Marshal(deliver.NewPayload(w, m.ID))
	o, _ := deliver.ParseOptions(w.Deliver)
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	cfg.Port = port
	return email.New(cfg).Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()})
}

// TestAuthAnswerClassified: what the SMTP server answers to AUTH is judged
// as its other answers are: a 4xx (454 Temporary authentication failure)
// or a connection lost is tried again on the ladder, a 5xx (535) is
// undeliverable. Both of the first were undeliverable at once: a mail lost
// to a server's passing trouble.
func TestAuthAnswerClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer string
		retry  bool
		detail string
	}{
		{"454 4.7.0 Temporary authentication failure", true, "SMTP AUTH: 454 "},
		{"", true, "SMTP AUTH failed"}, // the connection dropped
		{"535 5.7.8 Authentication credentials invalid", false, "SMTP AUTH: 535 "},
	} {
		s := &script{answers: map[string]string{"AUTH": tc.answer}}
		port := s.start(t)
		// 127.0.0.1 is a local host: net/smtp sends PLAIN to it without TLS.
		retry, err := sendTo(t, port, email.Config{Username: "vigil", Password: "pw-s3cret"})
		if err == nil || retry != tc.retry || !strings.HasPrefix(err.Error(), tc.detail) || strings.Contains(err.Error(), "pw-s3cret") {
			t.Errorf("AUTH answered %q: Send = %v, %v; want retry %v and an error starting %q, with no password", tc.answer, retry, err, tc.retry, tc.detail)
		}
		if n := len(s.sent()); n != 0 {
			t.Errorf("AUTH answered %q: the server got %d mails, want none", tc.answer, n)
		}
	}
}

// TestAuthNeverInPlaintext: without STARTTLS, the password is not sent to
// a server that is not this host's, and the attempt is undeliverable
// (trying again would not change it).
func TestAuthNeverInPlaintext(t *testing.T) {
	t.Parallel()
	s := &script{addr: "127.0.0.2"}
	port := s.start(t)
	retry, err := sendTo(t, port, email.Config{Host: "127.0.0.2", Username: "vigil", Password: "pw-s3cret"})
	if err == nil || retry || strings.Contains(err.Error(), "pw-s3cret") {
		t.Errorf("Send = %v, %v; want an undeliverable refusal, with no password", retry, err)
	}
	if slices.Contains(s.saw(), "AUTH") {
		t.Errorf("the server was sent %v: AUTH over plaintext", s.saw())
	}
}

// TestEndOfDataAnswer: the answer to the end of the message text decides
// whether the mail landed. A 4xx is tried again and a 5xx is
// undeliverable; any other 2xx than the 250 net/smtp expects is a mail
// taken, and a 1xx or 3xx, or no answer at all, is unknown: neither may be
// sent again, since the server may hold the first copy. Only a 4xx or 5xx
// says that it does not, and an unexpected 2xx was sent again.
func TestEndOfDataAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answer  string
		retry   bool
		ok      bool
		unknown bool
	}{
		{"451 4.3.0 Try again later", true, false, false},
		{"554 5.6.0 Message rejected", false, false, false},
		{"251 2.0.0 Queued", false, true, false},
		{"354 More?", false, false, true},
		{"", false, false, true}, // the connection dropped
	} {
		s := &script{answers: map[string]string{".": tc.answer}}
		port := s.start(t)
		retry, err := sendTo(t, port, email.Config{})
		if retry != tc.retry || (err == nil) != tc.ok || deliver.IsUnknown(err) != tc.unknown {
			t.Errorf("the end of data answered %q: Send = %v, %v (unknown %v); want retry %v, delivered %v, unknown %v",
				tc.answer, retry, err, deliver.IsUnknown(err), tc.retry, tc.ok, tc.unknown)
		}
		if n := len(s.sent()); n != 1 {
			t.Errorf("the end of data answered %q: the server got %d mails, want 1", tc.answer, n)
		}
	}
}

// TestSevenBitServer: a server that does not announce 8BITMIME (RFC 6152)
// is sent 7-bit text only: a body that is not ASCII (a sentence quoting a
// title with a dash) goes quoted-printable, and reads back the same. It
// went as raw 8-bit text, which such a server may refuse or mangle.
func TestSevenBitServer(t *testing.T) {
	t.Parallel()
	s := &script{answers: map[string]string{"EHLO": "250-localhost\r\n250 SIZE 10240000"}}
	port := s.start(t)
	st := memstore.New()
	const sentence = "db:5432 accepts connections — “ready” at last."
	w, m := settled(t, st, "w1", vigil.StateFired, sentence)
	o, _ := deliver.ParseOptions(w.Deliver)
	ch := email.New(email.Config{Host: "127.0.0.1", Port: port})
	if retry, err := ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Attempt: 1, Now: time.Now()}); err != nil {
		t.Fatalf("Send = %v, %v", retry, err)
	}
	sent := s.sent()
	if len(sent) != 1 {
		t.Fatalf("the server got %d mails, want 1", len(sent))
	}
	for i := 0; i < len(sent[0]); i++ {
		if sent[0][i] >= 0x80 {
			t.Fatalf("byte %d of the mail is %#x: 8-bit text to a server without 8BITMIME:\n%s", i, sent[0][i], sent[0])
		}
	}
	parsed, err := mail.ReadMessage(strings.NewReader(sent[0]))
	if err != nil {
		t.Fatal(err)
	}
	if cte := parsed.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Errorf("Content-Transfer-Encoding = %q, want quoted-printable", cte)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(parsed.Body))
	if !strings.Contains(string(body), sentence) {
		t.Errorf("body = %q, want the sentence", body)
	}

	// A server that announces it is sent the text as it is.
	s = &script{}
	port = s.start(t)
	ch = email.New(email.Config{Host: "127.0.0.1", Port: port})
	if retry, err := ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Attempt: 1, Now: time.Now()}); err != nil {
		t.Fatalf("Send = %v, %v", retry, err)
	}
	if sent := s.sent(); len(sent) != 1 || !strings.Contains(sent[0], "Content-Transfer-Encoding: 8bit") || !strings.Contains(sent[0], sentence) {
		t.Errorf("the server announcing 8BITMIME got %q, want the 8-bit text", sent)
	}
}

// TestOpeningAnswersClassified: a 5xx is undeliverable wherever it comes,
// as docs/delivery.md says: the greeting (554 No SMTP service here), the
// answer to EHLO and HELO, to STARTTLS; a 4xx there is tried again. The
// 5xx were tried again on the whole ladder.
func TestOpeningAnswersClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answers map[string]string
		tls     bool
		retry   bool
	}{
		{map[string]string{"greeting": "554 5.3.2 No SMTP service here"}, false, false},
		{map[string]string{"greeting": "421 4.3.2 Try again later"}, false, true},
		{map[string]string{"EHLO": "550 5.7.1 Go away", "HELO": "550 5.7.1 Go away"}, false, false},
		{map[string]string{"EHLO": "421 4.3.2 Busy", "HELO": "421 4.3.2 Busy"}, false, true},
		{map[string]string{"EHLO": "250-localhost\r\n250 STARTTLS", "STARTTLS": "502 5.5.1 Not implemented"}, true, false},
		{map[string]string{"EHLO": "250-localhost\r\n250 STARTTLS", "STARTTLS": "454 4.7.0 TLS not available"}, true, true},
	} {
		s := &script{answers: tc.answers}
		port := s.start(t)
		retry, err := sendTo(t, port, email.Config{StartTLS: tc.tls})
		if err == nil || retry != tc.retry {
			t.Errorf("the server answered %q: Send = %v, %v; want retry %v", tc.answers, retry, err, tc.retry)
		}
		if n := len(s.sent()); n != 0 {
			t.Errorf("the server answered %q: it got %d mails, want none", tc.answers, n)
		}
	}
}

// TestDefaultSenderOfAnAddress: with no smtp.from, the sender is vigil at
// the SMTP host; when the host is an IP address it is the address literal
// RFC 5321 spells (vigil@[127.0.0.1], vigil@[IPv6:::1]). It was
// "vigil@::1", no address at all, and "vigil@127.0.0.1", a domain named
// 127.0.0.1 that does not exist.
func TestDefaultSenderOfAnAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, want string }{
		{"127.0.0.1", "vigil@[127.0.0.1]"},
		{"::1", "vigil@[IPv6:::1]"},
		{"localhost", "vigil@localhost"},
	} {
		s := &script{addr: tc.host}
		if tc.host == "localhost" {
			s.addr = "127.0.0.1"
		}
		port := s.start(t)
		if retry, err := sendTo(t, port, email.Config{Host: tc.host}); err != nil {
			t.Fatalf("host %s: Send = %v, %v", tc.host, retry, err)
		}
		if got := s.said("MAIL FROM:"); len(got) != 1 || !strings.HasPrefix(got[0], "MAIL FROM:<"+tc.want+">") {
			t.Errorf("host %s: MAIL = %q, want MAIL FROM:<%s>", tc.host, got, tc.want)
		}
		parsed, err := mail.ReadMessage(strings.NewReader(s.sent()[0]))
		if err != nil {
			t.Fatal(err)
		}
		if from := parsed.Header.Get("From"); from != tc.want {
			t.Errorf("host %s: From = %q, want %s", tc.host, from, tc.want)
		}
	}
}
