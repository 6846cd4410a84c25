package email_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	smtp "github.com/emersion/go-smtp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/store/memstore"
)

// mailbox is an SMTP backend that keeps every message it accepts.
type mailbox struct {
	mu   sync.Mutex
	msgs []sent
	got  chan struct{}
	tls  []bool
}

type sent struct {
	from string
	to   []string
	data []byte
}

type session struct {
	mb  *mailbox
	cur sent
	tls bool
}

func (mb *mailbox) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &session{mb: mb, tls: isTLS}, nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.cur.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = b
	s.mb.mu.Lock()
	s.mb.msgs = append(s.mb.msgs, s.cur)
	s.mb.tls = append(s.mb.tls, s.tls)
	s.mb.mu.Unlock()
	s.mb.got <- struct{}{}
	return nil
}
func (s *session) Reset()        { s.cur = sent{} }
func (s *session) Logout() error { return nil }

func (mb *mailbox) sent() []sent {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]sent(nil), mb.msgs...)
}

// startSMTP runs a real SMTP server on 127.0.0.1:0 until the test ends.
func startSMTP(t *testing.T, tc *tls.Config) (*mailbox, int) {
	t.Helper()
	mb := &mailbox{got: make(chan struct{}, 16)}
	srv := smtp.NewServer(mb)
	srv.Domain = "localhost"
	srv.TLSConfig = tc
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	return mb, serve(t, srv)
}

// serve runs srv on 127.0.0.1:0 until the test ends, and returns its port.
func serve(t *testing.T, srv *smtp.Server) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func settled(t *testing.T, st vigil.Store, id string, state vigil.State, sentence string) (*vigil.Watch, *vigil.Message) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	w := &vigil.Watch{ID: id, Kind: vigil.KindTCP, Predicate: json.RawMessage(`{"address":"db:` + id + `"}`), Recipient: "ops",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 5 * time.Second, Deadline: now.Add(time.Hour), CreatedAt: now,
		Deliver: json.RawMessage(`{"email":{"to":"ops@example.com"}}`)}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: now, Summary: "connected to db:5432 in 3ms", Facts: map[string]any{"ms": 3.0}}
	out := &vigil.Outcome{State: state, Sentence: sentence, Reason: "satisfied", Observation: obs}
	m := &vigil.Message{ID: "msg-" + id, Recipient: w.Recipient, WatchID: id, Type: vigil.MessageTypeFor(state), Text: sentence, CreatedAt: now}
	if _, err := st.WatchSettle(t.Context(), []vigil.WatchSettleParams{{ID: id, State: state, Outcome: out, SettledAt: now, Message: m}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.WatchGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got, m
}

func run(t *testing.T, d *deliver.Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitIdle waits (bounded) until the dispatcher has nothing queued or in
// flight: the receipt has been written.
func waitIdle(t *testing.T, d *deliver.Dispatcher) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); d.Pending() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the dispatcher did not finish within 10s")
		}
	}
}

// TestFiredMailsOnceExpiredNever: against a real SMTP server, a fired
// watch sends exactly one mail whose subject is the sentence; an expired
// one sends none.
func TestFiredMailsOnceExpiredNever(t *testing.T) {
	t.Parallel()
	mb, port := startSMTP(t, nil)
	st := memstore.New()
	ch := email.New(email.Config{Host: "127.0.0.1", Port: port, From: "vigil@example.com"})
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelEmail: ch}})
	run(t, d)

	ew, em := settled(t, st, "expired", vigil.StateExpired, "db:expired did not answer before its deadline.")
	d.Deliver(ew, em)
	if n := d.Pending(); n != 0 {
		t.Errorf("an expired watch queued %d email deliveries, want none", n)
	}
	const sentence = "db:5432 accepts connections — “ready” at last."
	fw, fm := settled(t, st, "fired", vigil.StateFired, sentence)
	d.Deliver(fw, fm)
	select {
	case <-mb.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no mail within 10s")
	}
	waitIdle(t, d)
	msgs := mb.sent()
	if len(msgs) != 1 {
		t.Fatalf("the server got %d mails, want exactly 1", len(msgs))
	}
	if msgs[0].from != "vigil@example.com" || len(msgs[0].to) != 1 || msgs[0].to[0] != "ops@example.com" {
		t.Errorf("envelope = %s -> %v, want vigil@example.com -> [ops@example.com]", msgs[0].from, msgs[0].to)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(string(msgs[0].data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
	if err != nil || subject != sentence {
		t.Errorf("Subject = %q (%v), want %q", subject, err, sentence)
	}
	body, _ := io.ReadAll(parsed.Body)
	if !strings.Contains(string(body), "connected to db:5432 in 3ms") {
		t.Errorf("body = %q, want the observation", body)
	}
	got, _ := st.WatchGet(t.Context(), "fired")
	if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptDelivered || got.Receipts[0].Channel != "email" {
		t.Errorf("receipts = %+v, want one delivered email receipt", got.Receipts)
	}
	if got, _ := st.WatchGet(t.Context(), "expired"); len(got.Receipts) != 0 {
		t.Errorf("expired watch receipts = %+v, want none", got.Receipts)
	}
}

// TestStartTLS: with smtp.starttls the connection is upgraded before the
// message is sent; a server without STARTTLS is refused.
func TestStartTLS(t *testing.T) {
	t.Parallel()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	mb, port := startSMTP(t, &tls.Config{Certificates: ts.TLS.Certificates})
	st := memstore.New()
	ch := email.New(email.Config{Host: "127.0.0.1", Port: port, StartTLS: true, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"}})
	w, m := settled(t, st, "w1", vigil.StateFailed, "The check failed.")
	p, _ := json.Marshal(deliver.NewPayload(w, m.ID))
	o, _ := deliver.ParseOptions(w.Deliver)
	retry, err := ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()})
	if err != nil || retry {
		t.Fatalf("Send = %v, %v", retry, err)
	}
	<-mb.got
	if !mb.tls[0] {
		t.Error("the mail went over a connection that was not upgraded")
	}
	_, plainPort := startSMTP(t, nil)
	ch = email.New(email.Config{Host: "127.0.0.1", Port: plainPort, StartTLS: true})
	if _, err := ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()}); err == nil ||
		!strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("Send to a server without STARTTLS = %v, want a refusal naming STARTTLS", err)
	}
	// A closed port: retried.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ch = email.New(email.Config{Host: "127.0.0.1", Port: closed, Password: "pw-s3cret"})
	retry, err = ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()})
	if !retry || err == nil || strings.Contains(err.Error(), "pw-s3cret") || strings.Contains(err.Error(), strconv.Itoa(closed)) {
		t.Errorf("Send to a closed port = %v, %v; want a retry naming no password or address", retry, err)
	}
}

// TestImplicitTLS: with TLS (smtp.tls, port 465's "SMTPS") the connection
// speaks TLS from its first byte and the mail goes over it; a certificate
// the roots do not vouch for is refused, and tried again, as STARTTLS's is.
func TestImplicitTLS(t *testing.T) {
	t.Parallel()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	mb := &mailbox{got: make(chan struct{}, 16)}
	srv := smtp.NewServer(mb)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: ts.TLS.Certificates})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	st := memstore.New()
	w, m := settled(t, st, "w1", vigil.StateFailed, "The check failed.")
	p, _ := json.Marshal(deliver.NewPayload(w, m.ID))
	o, _ := deliver.ParseOptions(w.Deliver)
	send := func(cfg email.Config) (bool, error) {
		cfg.Host, cfg.Port, cfg.Timeout = "127.0.0.1", port, 5*time.Second
		return email.New(cfg).Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()})
	}
	// StartTLS stays on, as smtp.starttls's default: TLS makes it moot.
	retry, err := send(email.Config{TLS: true, StartTLS: true,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"}})
	if err != nil || retry {
		t.Fatalf("Send over implicit TLS = %v, %v", retry, err)
	}
	<-mb.got
	if got := mb.sent(); len(got) != 1 || !mb.tls[0] || got[0].to[0] != "ops@example.com" {
		t.Fatalf("sent %d mails, over TLS %v; want one, over TLS", len(got), mb.tls)
	}
	// Verified as STARTTLS verifies: a certificate for another name, or
	// from roots not trusted, is refused before anything is said, and
	// tried again.
	for _, tc := range []*tls.Config{nil, {RootCAs: pool, ServerName: "other.example.org"}} {
		retry, err := send(email.Config{TLS: true, Password: "pw-s3cret", TLSConfig: tc})
		if !retry || err == nil || !strings.Contains(err.Error(), "TLS handshake") || strings.Contains(err.Error(), "pw-s3cret") {
			t.Errorf("Send to an unverified certificate (%v) = %v, %v; want a retry naming the TLS handshake", tc, retry, err)
		}
	}
	if n := len(mb.sent()); n != 1 {
		t.Errorf("the server holds %d mails, want the first alone", n)
	}
}
