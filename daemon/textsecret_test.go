package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestListTextFindsNoSecret: a list's text filter matches the predicate
// as answers show it, credentials [redacted] (docs/security.md, "Secrets
// never leak"): a text found only in a redacted value must find nothing,
// or ?text= would tell a caller a header's secret a letter at a time.
func TestListTextFindsNoSecret(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	ctx := t.Context()
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r",
		Predicate: json.RawMessage(`{"url":"http://127.0.0.1:9/health","headers":{"X-Api-Key":"s3cretvalue"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		want int
	}{
		{"127.0.0.1:9/health", 1},
		{"x-api-key", 1},
		{"s3cret", 0},
		{"s3cretvalue", 0},
	} {
		page, err := c.Watches(ctx, vigil.ListRequest{Text: tc.text})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Watches) != tc.want {
			t.Errorf("text %q found %d watches (%s has the header's secret), want %d", tc.text, len(page.Watches), w.ID, tc.want)
		}
	}
}
