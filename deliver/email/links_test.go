package email_test

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil/deliver/email"
)

// TestLinks: a link verifies for its own watch only, under the key that
// made it (or any key still listed); a changed signature, another watch's
// id or another key does not.
func TestLinks(t *testing.T) {
	t.Parallel()
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	l := email.NewLinks("https://vigil.example/v1/unsubscribe/", key)
	u := l.URL("01WATCH")
	rest, ok := strings.CutPrefix(u, "https://vigil.example/v1/unsubscribe/01WATCH/")
	if !ok || len(rest) != 43 {
		t.Fatalf("URL = %q; want the base, the watch id and a 43-character signature", u)
	}
	if !l.Valid("01WATCH", rest) {
		t.Error("the link's own signature does not verify")
	}
	flipped := []byte(rest)
	flipped[3] ^= 1
	for _, tc := range []struct{ id, sig string }{
		{"01OTHER", rest}, {"01WATCH", string(flipped)}, {"01WATCH", ""}, {"01WATCH", rest[:20]}, {"", rest},
	} {
		if l.Valid(tc.id, tc.sig) {
			t.Errorf("Valid(%q, %q) = true, want false", tc.id, tc.sig)
		}
	}
	if email.NewLinks("x/", other).Valid("01WATCH", rest) {
		t.Error("a link made with another key verifies")
	}
	if !email.NewLinks("x/", other, key).Valid("01WATCH", rest) {
		t.Error("a link made with an older key no longer verifies while that key is listed")
	}
}
