package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="
)

// got is what the local receiver saw.
type got struct {
	h    http.Header
	body []byte
	at   time.Time
}

func delivery(url string) *deliver.Delivery {
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindTimer, Recipient: "agent-7", State: vigil.StateFired,
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer went off.", Reason: "satisfied"}}
	p, _ := json.Marshal(deliver.NewPayload(w, "01MSG"))
	return &deliver.Delivery{Watch: w, MessageID: "01MSG", Payload: p, Attempt: 1, Now: time.Now(),
		Options: deliver.Options{Webhook: &deliver.WebhookOptions{URL: url}}}
}

// TestReceiverVerifies: a local receiver checks each request with Verify;
// a tampered body, an old timestamp and a wrong secret fail.
func TestReceiverVerifies(t *testing.T) {
	t.Parallel()
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		now := time.Now()
		if err := webhook.Verify(secretA, r.Header, body, now, 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		seen <- got{h: r.Header.Clone(), body: body, at: now}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ch, err := webhook.New(webhook.Config{Secrets: []string{secretA}})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := ch.Send(t.Context(), delivery(srv.URL+"/hook"))
	if err != nil || retry {
		t.Fatalf("Send = %v, %v; want delivered", retry, err)
	}
	g := <-seen
	if id := g.h.Get("webhook-id"); id != "01MSG" {
		t.Errorf("webhook-id = %q, want the message id", id)
	}
	if sig := g.h.Get("webhook-signature"); !strings.HasPrefix(sig, "v1,") {
		t.Errorf("webhook-signature = %q, want v1,<base64>", sig)
	}

	tampered := append([]byte(nil), g.body...)
	tampered[len(tampered)-2] ^= 1
	for _, tt := range []struct {
		name   string
		secret string
		body   []byte
		now    time.Time
		want   error
	}{
		{"as received", secretA, g.body, g.at, nil},
		{"tampered body", secretA, tampered, g.at, webhook.ErrSignature},
		{"old timestamp", secretA, g.body, g.at.Add(10 * time.Minute), webhook.ErrTimestamp},
		{"timestamp from the future", secretA, g.body, g.at.Add(-10 * time.Minute), webhook.ErrTimestamp},
		{"another secret", secretB, g.body, g.at, webhook.ErrSignature},
	} {
		if err := webhook.Verify(tt.secret, g.h, tt.body, tt.now, 5*time.Minute); !errors.Is(err, tt.want) {
			t.Errorf("Verify(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
	h := g.h.Clone()
	h.Del("webhook-id")
	if err := webhook.Verify(secretA, h, g.body, g.at, 0); !errors.Is(err, webhook.ErrMissingHeaders) {
		t.Errorf("Verify(no webhook-id) = %v, want ErrMissingHeaders", err)
	}
}

// TestRotation: with two daemon secrets, each signs; a receiver holding
// either one verifies.
func TestRotation(t *testing.T) {
	t.Parallel()
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- got{h: r.Header.Clone(), body: body, at: time.Now()}
	}))
	defer srv.Close()
	ch, err := webhook.New(webhook.Config{Secrets: []string{secretA, secretB}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Send(t.Context(), delivery(srv.URL)); err != nil {
		t.Fatal(err)
	}
	g := <-seen
	if n := len(strings.Fields(g.h.Get("webhook-signature"))); n != 2 {
		t.Errorf("webhook-signature holds %d signatures, want 2", n)
	}
	for _, s := range []string{secretA, secretB} {
		if err := webhook.Verify(s, g.h, g.body, g.at, 0); err != nil {
			t.Errorf("Verify with one of the rotated secrets = %v", err)
		}
	}
	// A watch's own secret replaces the daemon's.
	d := delivery(srv.URL)
	d.Options.Webhook.Secret = secretB
	if _, err := ch.Send(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	g = <-seen
	if err := webhook.Verify(secretA, g.h, g.body, g.at, 0); err == nil {
		t.Error("a request signed with the watch's secret verified with the daemon's")
	}
	if err := webhook.Verify(secretB, g.h, g.body, g.at, 0); err != nil {
		t.Errorf("Verify with the watch's secret = %v", err)
	}
}

// TestClassification: statuses and transport failures sort into
// delivered, retry, rejected and unknown; errors never hold the URL.
func TestClassification(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status    int
		retry, ok bool
	}{{200, false, true}, {204, false, true}, {400, false, false}, {410, false, false}, {301, false, false},
		{429, true, false}, {500, true, false}, {503, true, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tt.status == 301 {
				w.Header().Set("Location", "/elsewhere")
			}
			w.WriteHeader(tt.status)
		}))
		ch, _ := webhook.New(webhook.Config{Secrets: []string{secretA}})
		retry, err := ch.Send(t.Context(), delivery(srv.URL+"/?token=tok-s3cret"))
		srv.Close()
		if retry != tt.retry || (err == nil) != tt.ok {
			t.Errorf("HTTP %d: Send = %v, %v; want retry %v, ok %v", tt.status, retry, err, tt.retry, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "tok-s3cret") {
			t.Errorf("HTTP %d: error %q holds the URL", tt.status, err)
		}
	}
	// Connection refused: nothing was sent, retry.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/?token=tok-s3cret"
	srv.Close()
	ch, _ := webhook.New(webhook.Config{Secrets: []string{secretA}})
	retry, err := ch.Send(t.Context(), delivery(url))
	if !retry || err == nil || deliver.IsUnknown(err) || strings.Contains(err.Error(), "tok-s3cret") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("refused: Send = %v, %v; want a retry naming no address", retry, err)
	}
	// A receiver that holds the request past the timeout: unknown.
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	ch, _ = webhook.New(webhook.Config{Secrets: []string{secretA}, Timeout: 100 * time.Millisecond})
	retry, err = ch.Send(context.Background(), delivery(slow.URL))
	if retry || !deliver.IsUnknown(err) {
		t.Errorf("hang: Send = %v, %v; want unknown, no retry", retry, err)
	}
}

func ExampleVerify() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p deliver.Payload
		_ = json.Unmarshal(body, &p)
		// Deduplicate on r.Header.Get("webhook-id"): a retry has the same id.
		w.WriteHeader(http.StatusNoContent)
	})
	_ = handler
}

// TestMetadataRefused: the channel's own client never reaches link-local
// (cloud metadata) addresses; with DenyPrivate, loopback neither. A refused
// address is not retried.
func TestMetadataRefused(t *testing.T) {
	t.Parallel()
	ch, _ := webhook.New(webhook.Config{Secrets: []string{secretA}})
	retry, err := ch.Send(t.Context(), delivery("http://169.254.169.254/latest/meta-data/"))
	if retry || err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("Send to a metadata address = %v, %v; want a refusal, not retried", retry, err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ch, _ = webhook.New(webhook.Config{Secrets: []string{secretA}, DenyPrivate: true})
	if retry, err := ch.Send(t.Context(), delivery(srv.URL)); retry || err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Send to loopback with DenyPrivate = %v, %v; want a refusal", retry, err)
	}
}

func ExampleSign() {
	key, _ := deliver.SecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	body := []byte(`{"type":"watch.settled"}`)
	at := time.Unix(1_790_000_000, 0)
	h := http.Header{}
	webhook.SetHeaders(h, [][]byte{key}, "01MSG", at, body)
	fmt.Println(h.Get("webhook-id"), h.Get("webhook-timestamp"))
	fmt.Println(webhook.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, body, at.Add(time.Minute), 0))
	fmt.Println(webhook.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte(`{"type":"tampered"}`), at, 0))
	// Output:
	// 01MSG 1790000000
	// <nil>
	// webhook: no signature matches
}

// failingConn is a connection whose every write fails (reset by the peer)
// and whose reads wait until it is closed.
type failingConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *failingConn) Write([]byte) (int, error) {
	// As a *net.TCPConn says it.
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}
func (c *failingConn) Read([]byte) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}
func (c *failingConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}
func (c *failingConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *failingConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *failingConn) SetDeadline(time.Time) error      { return nil }
func (c *failingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *failingConn) SetWriteDeadline(time.Time) error { return nil }

// TestWriteFailedIsRetried: a request whose write failed (the connection
// reset before it was written) never reached the receiver whole: it is
// retried, not unknown.
func TestWriteFailedIsRetried(t *testing.T) {
	t.Parallel()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return &failingConn{closed: make(chan struct{})}, nil
		},
	}}
	ch, _ := webhook.New(webhook.Config{Secrets: []string{secretA}, Client: client})
	retry, err := ch.Send(t.Context(), delivery("http://receiver.example/hook"))
	if !retry || err == nil || deliver.IsUnknown(err) {
		t.Errorf("write failed: Send = %v, %v; want a retry, not unknown", retry, err)
	}
}
