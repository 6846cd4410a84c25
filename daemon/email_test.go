package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	smtp "github.com/emersion/go-smtp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// smtpServer is a real SMTP server on 127.0.0.1:0 that keeps what it
// accepts; refuse, when set, answers MAIL FROM of a session.
type smtpServer struct {
	mu     sync.Mutex
	mails  [][]byte
	got    chan []byte
	tries  chan struct{}
	refuse func(n int) error
	n      int
}

type smtpSession struct{ s *smtpServer }

func (s *smtpServer) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s}, nil }
func (x *smtpSession) Mail(string, *smtp.MailOptions) error {
	x.s.mu.Lock()
	x.s.n++
	n, refuse := x.s.n, x.s.refuse
	x.s.mu.Unlock()
	select {
	case x.s.tries <- struct{}{}:
	default:
	}
	if refuse != nil {
		return refuse(n)
	}
	return nil
}
func (x *smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (x *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.mails = append(x.s.mails, b)
	x.s.mu.Unlock()
	x.s.got <- b
	return nil
}
func (x *smtpSession) Reset()        {}
func (x *smtpSession) Logout() error { return nil }

func (s *smtpServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mails)
}

func startSMTP(t *testing.T, refuse func(n int) error) (*smtpServer, int) {
	t.Helper()
	s := &smtpServer{got: make(chan []byte, 8), tries: make(chan struct{}, 8), refuse: refuse}
	srv := smtp.NewServer(s)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return s, ln.Addr().(*net.TCPAddr).Port
}

func emailConfig(t *testing.T, port int) *running {
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Delivery.SMTP.Host, cfg.Delivery.SMTP.Port, cfg.Delivery.SMTP.NoStartTLS = "127.0.0.1", port, true
	return start(t, cfg)
}

// post sends a one-click unsubscribe request, with no bearer token.
func post(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Post(u, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestEmailUnsubscribeLink: through the daemon's wiring, a delivery mail
// carries a one-click List-Unsubscribe link to this daemon; posting it,
// with no bearer token, turns email off for that watch; a forged link
// is not found and changes nothing.
func TestEmailUnsubscribeLink(t *testing.T) {
	t.Parallel()
	mb, port := startSMTP(t, nil)
	d := emailConfig(t, port)
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "mail", Predicate: json.RawMessage(`{"in":"1s"}`),
		Deliver: json.RawMessage(`{"email":{"to":"ops@example.com"},"progress":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	select {
	case raw = <-mb.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no mail within 30s")
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	link := strings.TrimSuffix(strings.TrimPrefix(msg.Header.Get("List-Unsubscribe"), "<"), ">")
	if !strings.HasPrefix(link, d.URL()+"/v1/unsubscribe/"+w.ID+"/") || msg.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("List-Unsubscribe %q, List-Unsubscribe-Post %q; want a one-click link to this daemon for %s",
			msg.Header.Get("List-Unsubscribe"), msg.Header.Get("List-Unsubscribe-Post"), w.ID)
	}
	if code := post(t, link[:len(link)-2]+"AA"); code != http.StatusNotFound {
		t.Errorf("a forged link = %d, want 404", code)
	}
	if got, _ := c.Watch(t.Context(), w.ID); !strings.Contains(string(got.Deliver), "email") {
		t.Fatalf("a forged link changed the options: %s", got.Deliver)
	}
	if code := post(t, link); code != http.StatusOK {
		t.Fatalf("the link = %d, want 200", code)
	}
	got, err := c.Watch(t.Context(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Deliver) != `{"progress":true}` {
		t.Errorf("after unsubscribing, deliver = %s; want email gone and the rest kept", got.Deliver)
	}
	if code := post(t, link); code != http.StatusOK {
		t.Errorf("the link a second time = %d, want 200 (idempotent)", code)
	}
}

// TestRevokedTokenMailsNothing: a scoped token's watch settles, its first
// mail is refused for now (SMTP 451), and the token is revoked before the
// retry: the retry sends nothing, and the receipt says why.
func TestRevokedTokenMailsNothing(t *testing.T) {
	t.Parallel()
	mb, port := startSMTP(t, func(n int) error {
		if n == 1 {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		}
		return nil
	})
	d := emailConfig(t, port)
	admin := newClient(t, d)
	tn := newTenant(t, d, admin, "mailer", false)
	w, err := tn.c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: tn.recipient, Predicate: json.RawMessage(`{"in":"1s"}`),
		Deliver: json.RawMessage(`{"email":{"to":"ops@example.com"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-mb.tries:
	case <-time.After(30 * time.Second):
		t.Fatal("no mail attempt within 30s")
	}
	if _, err := admin.RevokeToken(t.Context(), tn.tokenID); err != nil {
		t.Fatal(err)
	}
	r := waitReceipt(t, admin, w.ID, vigil.ReceiptUndeliverable)
	if !strings.Contains(r.Detail, "revoked") {
		t.Errorf("receipt %+v; want it to say the token was revoked", r)
	}
	if n := mb.count(); n != 0 {
		t.Errorf("%d mails sent for a revoked token's watch, want none", n)
	}
}

// waitReceipt polls (bounded) until watch id's email receipt has status.
func waitReceipt(t *testing.T, c *client.Client, id, status string) vigil.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		w, err := c.Watch(ctx, id)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if w != nil {
			for _, r := range w.Receipts {
				if r.Channel == "email" && r.Status == status {
					return r
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("watch %s: no %s email receipt within 30s (%+v)", id, status, w)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
