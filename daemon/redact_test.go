package daemon_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// logBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecretsNeverLeak drives every component that handles a secret — the
// admin and scoped tokens (httpapi, auth, client), a URL with credentials
// and an Authorization header in a predicate (engine, scheduler, the http
// watcher, the mailbox) — and checks that no secret reaches the debug log,
// an error, or any answer (show, list, why, inbox).
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := testConfig(t.TempDir(), t.TempDir())
	d, err := daemon.New(t.Context(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	r := runDaemon(t, d)
	admin := newClient(t, r)
	ctx := t.Context()
	var answers []string
	keep := func(v any) {
		b, _ := json.Marshal(v)
		answers = append(answers, string(b))
	}

	tok, err := admin.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"agent-s"}})
	if err != nil {
		t.Fatal(err)
	}
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("webhook-SECRET-5-0123456789abcdef"))
	secrets := []string{d.Token(), tok.Secret, "pw-SECRET-1", "hdr-SECRET-2", "vgl_wrongSECRET3", "q-SECRET-4", whsec, "hookpw-SECRET-6"}
	sc, err := client.New(r.Addr(), tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.CloseIdleConnections)
	pred := json.RawMessage(`{"url":"http://bob:pw-SECRET-1@127.0.0.1:1/health?access_token=q-SECRET-4","headers":{"Authorization":"Bearer hdr-SECRET-2"},"timeout":"1s"}`)
	w, err := sc.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "agent-s", Predicate: pred, Every: "1s", MaxErrors: 1,
		Deliver: json.RawMessage(`{"webhook":{"url":"http://hook:hookpw-SECRET-6@127.0.0.1:1/in","secret":"` + whsec + `"}}`)})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	keep(w)
	for _, get := range []func() (any, error){
		func() (any, error) { return sc.Watch(ctx, w.ID) },
		func() (any, error) { return sc.Why(ctx, w.ID) },
		func() (any, error) { return sc.Watches(ctx, vigil.ListRequest{}) },
		func() (any, error) { return admin.Watches(ctx, vigil.ListRequest{}) },
		func() (any, error) { return settle(t, sc, w.ID), nil },
		func() (any, error) {
			return sc.Messages(ctx, vigil.MessagesRequest{Recipient: "agent-s", Reader: "x"})
		},
		func() (any, error) { return admin.Tokens(ctx, true) },
	} {
		v, err := get()
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		keep(v)
	}
	// A wrong token, then the scoped token after revocation: refused, and
	// the refusals name neither.
	for _, bad := range []string{"vgl_wrongSECRET3", tok.Secret} {
		if bad == tok.Secret {
			if _, err := admin.RevokeToken(ctx, tok.ID); err != nil {
				t.Fatal(err)
			}
		}
		c, err := client.New(r.Addr(), bad, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Watches(ctx, vigil.ListRequest{})
		if vigil.ErrorCode(err) != vigil.CodeUnauthorized {
			t.Errorf("Watches with a bad token = %v, want unauthorized", err)
		}
		answers = append(answers, fmt.Sprint(err))
		c.CloseIdleConnections()
	}
	// An invalid registration echoing the predicate back.
	_, err = admin.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "agent-s", Predicate: json.RawMessage(`{"url":"http://bob:pw-SECRET-1@127.0.0.1:1/","bogus":1}`)})
	answers = append(answers, fmt.Sprint(err))

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	all := logs.String() + strings.Join(answers, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			i := strings.Index(all, s)
			t.Errorf("secret %q leaked: …%s…", s, all[max(0, i-200):min(len(all), i+len(s)+50)])
		}
	}
	if !strings.Contains(logs.String(), `"path":"/v1/watches"`) {
		t.Errorf("the debug log has no request lines; the test proves nothing:\n%s", logs.String())
	}
}

// runDaemon runs d (made by the caller, with its own logger) like start.
func runDaemon(t *testing.T, d *daemon.Daemon) *running {
	t.Helper()
	r := daemontest.Run(t, d)
	return &running{Daemon: r.Daemon, stop: r.Stop}
}
