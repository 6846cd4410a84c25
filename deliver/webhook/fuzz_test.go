package webhook_test

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/vigil-run/vigil/deliver/webhook"
)

// FuzzVerify: the verifier never panics on any headers, body and secret;
// it accepts only what was signed with the key: a message signed for the
// body verifies, and the same headers over any other body do not.
func FuzzVerify(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	now := time.Unix(1_790_000_000, 0)
	f.Add(secret, "msg_1", "1790000000", "v1,abc=", []byte(`{"ok":true}`), []byte(`{"ok":false}`))
	f.Add("whsec_!!", "", "", "", []byte{}, []byte("x"))
	f.Add(secret, "msg_2", "-1", "v1, v2,xyz v1,", []byte("a"), []byte("b"))
	f.Add(secret, "msg_3", "99999999999999999999", "v1,"+webhook.Sign([][]byte{key}, "msg_3", now, []byte("a")), []byte("a"), []byte("a"))
	f.Fuzz(func(t *testing.T, sec, id, ts, sig string, body, other []byte) {
		h := http.Header{}
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, ts)
		h.Set(webhook.HeaderSignature, sig)
		_ = webhook.Verify(sec, h, body, now, 0)

		if id == "" {
			return
		}
		good := http.Header{}
		webhook.SetHeaders(good, [][]byte{key}, id, now, body)
		if good.Get(webhook.HeaderID) != id {
			return // not a value a header can carry
		}
		if err := webhook.Verify(secret, good, body, now, 0); err != nil {
			t.Fatalf("Verify(signed %q) = %v, want nil", body, err)
		}
		if string(other) != string(body) {
			if err := webhook.Verify(secret, good, other, now, 0); err == nil {
				t.Fatalf("Verify accepted %q under the signature of %q", other, body)
			}
		}
	})
}
