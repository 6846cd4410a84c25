package vigil

import "strings"

// ValidName checks a recipient, reader, label key or idempotency key: 1 to
// maxBytes bytes of letters, digits and . _ : @ + - (no slash: a recipient
// is a URL path segment). The error names field.
func ValidName(field, s string, maxBytes int) error {
	if s == "" {
		return FieldErrorf(CodeInvalidRequest, field, "%s is required", field)
	}
	if len(s) > maxBytes {
		return FieldErrorf(CodeInvalidRequest, field, "%s is longer than %d bytes", field, maxBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:@+-", c) >= 0 {
			continue
		}
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return FieldErrorf(CodeInvalidRequest, field, "%s %q may hold only letters, digits and . _ : @ + -", field, s)
	}
	return nil
}
