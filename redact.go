package vigil

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
)

// Redacted replaces a secret wherever one would otherwise be shown.
const Redacted = "[redacted]"

// secretWords are the parts of a key or query parameter name that mark its
// value as a secret.
var secretWords = []string{"authorization", "token", "secret", "password", "passwd", "api_key", "apikey", "api-key", "cookie", "credential", "private_key", "signature"}

// SecretName reports whether a key, header or parameter name holds a
// secret (Authorization, X-Api-Key, access_token, webhook_secret, …).
func SecretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// RedactURL returns s with the password of its user info and the values of
// secret-named query parameters replaced by Redacted. A string that is not
// an absolute URL comes back as it is.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		if i, j := strings.Index(s, "://"), strings.LastIndex(s, "@"); i >= 0 && j > i {
			return s[:i+3] + Redacted + s[j:] // unparsable, but credentials-shaped
		}
		return s
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if SecretName(k) {
				q[k] = []string{"REDACTED"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return s
	}
	return strings.ReplaceAll(u.String(), "REDACTED", Redacted)
}

// RedactJSON returns raw with its secrets replaced by Redacted: the value
// of every member whose name holds a secret (SecretName), and credentials
// in every string that is a URL. raw comes back unchanged (the same bytes)
// when it holds none, or when it is not JSON.
func RedactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !mayHoldSecret(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	v, changed := redactValue(v)
	if !changed {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return raw
	}
	return json.RawMessage(bytes.TrimRight(b.Bytes(), "\n"))
}

// mayHoldSecret reports whether raw might hold something RedactJSON
// replaces: a secret word (secretWords, in any ASCII case), or a URL's
// "://" and an "@", somewhere in its bytes. Text with an escape or a byte outside
// ASCII (where strings.ToLower may fold other letters into a secret word)
// is always read whole. Every registration's answer and every event of a
// watch goes through RedactJSON, and most predicates hold neither: this
// scan spares them a full decode.
func mayHoldSecret(raw []byte) bool {
	var buf [512]byte
	lower := buf[:0]
	for _, c := range raw {
		switch {
		case c == '\\' || c >= 0x80:
			return true
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	// RedactURL changes a URL only for a password, which needs an "@",
	// or for a secret-named query parameter, which needs a secret word.
	if bytes.IndexByte(lower, '@') >= 0 && bytes.Contains(lower, []byte("://")) {
		return true
	}
	for _, w := range secretWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

func redactValue(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		changed := false
		for k, e := range x {
			if SecretName(k) {
				if s, ok := e.(string); !ok || s != "" {
					x[k] = Redacted
					changed = true
				}
				continue
			}
			if r, c := redactValue(e); c {
				x[k], changed = r, true
			}
		}
		return x, changed
	case []any:
		changed := false
		for i, e := range x {
			if r, c := redactValue(e); c {
				x[i], changed = r, true
			}
		}
		return x, changed
	case string:
		if r := RedactURL(x); r != x {
			return r, true
		}
	}
	return v, false
}
