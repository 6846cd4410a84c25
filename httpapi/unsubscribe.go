package httpapi

import (
	"html/template"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// UnsubscribePrefix starts the path of a delivery mail's one-click
// unsubscribe link: UnsubscribePrefix + WATCH_ID + "/" + SIG.
const UnsubscribePrefix = wire.UnsubscribePrefix

// maxUnsubscribeBody bounds the form a one-click POST sends
// ("List-Unsubscribe=One-Click").
const maxUnsubscribeBody = 1 << 10

var errNoUnsubscribe = vigil.Errorf(vigil.CodeNotFound, "this daemon sends no email, so it has no unsubscribe links")

// unsubscribe serves GET and POST /v1/unsubscribe/{id}/{sig}: no bearer
// token, the signature is the capability (see Options.UnsubscribeFunc).
// A POST (the mail provider's one-click request of RFC 8058, or the
// page's button) turns email off for the watch; a GET only shows the
// page, since link scanners follow GETs.
func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	if s.unsub == nil {
		return errNoUnsubscribe
	}
	id, sig := r.PathValue("id"), r.PathValue("sig")
	apply := r.Method == http.MethodPost
	if apply {
		// The body says only "List-Unsubscribe=One-Click": read (bounded)
		// and ignore it, as RFC 8058 allows.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && (err != nil ||
			mt != "application/x-www-form-urlencoded" && mt != "multipart/form-data") {
			return vigil.Errorf(vigil.CodeUnsupportedMedia, "an unsubscribe request is a form post (List-Unsubscribe=One-Click)")
		}
		if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxUnsubscribeBody)); err != nil {
			return tooLarge(maxUnsubscribeBody)
		}
	}
	if err := s.unsub(r.Context(), id, sig, apply); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	// Not framed: the page's one button turns mail off, and a page that
	// frames it could lure the click (the signed link is in every mail).
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	return unsubscribePage.Execute(w, struct {
		ID   string
		Done bool
	}{id, apply})
}

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">
<title>vigil: email about watch {{.ID}}</title></head>
<body>
{{if .Done}}<p>Email about watch {{.ID}} is off: vigil sends no more email about it.
Its outcome stays in the recipient's mailbox.</p>
{{else}}<p>Turn off email about watch {{.ID}}?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Turn off email</button></form>
{{end}}</body></html>
`))

// isUnsubscribe reports whether path is an unsubscribe link, whose
// signature never reaches a log.
func isUnsubscribe(path string) bool { return strings.HasPrefix(path, UnsubscribePrefix) }
