package email

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
)

// Links makes and checks the one-click unsubscribe links of delivery mails
// (List-Unsubscribe, RFC 8058). A link is Base + WATCH_ID + "/" + SIG,
// where SIG is the unpadded base64url HMAC-SHA256 of "vigil unsubscribe\x00"
// and the watch id, under a key only the daemon holds. Whoever holds a
// link (the mail's reader, or their mail provider) can turn email off for
// that one watch and nothing else, with no bearer token; without the key
// no link can be made for another watch.
type Links struct {
	base string
	keys [][]byte
}

// NewLinks returns links under base (the daemon's public URL and the
// route's path, ending in "/"). keys[0] signs; every key verifies, so the
// key can be replaced while older mails still work.
func NewLinks(base string, keys ...[]byte) *Links {
	return &Links{base: base, keys: keys}
}

func (l *Links) sign(key []byte, watchID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("vigil unsubscribe\x00" + watchID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// URL returns the unsubscribe link of a watch's mails.
func (l *Links) URL(watchID string) string {
	if l == nil || len(l.keys) == 0 {
		return ""
	}
	return l.base + url.PathEscape(watchID) + "/" + l.sign(l.keys[0], watchID)
}

// Valid reports whether sig is the signature of watchID under one of the
// keys, comparing in constant time.
func (l *Links) Valid(watchID, sig string) bool {
	if l == nil || watchID == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	ok := false
	for _, k := range l.keys {
		want, _ := base64.RawURLEncoding.DecodeString(l.sign(k, watchID))
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}
