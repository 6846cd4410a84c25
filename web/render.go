package web

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// pageData is what every page's layout reads.
type pageData struct {
	Title, Page string
	Session     *sessionView
	Data        any
}

// sessionView is what a page may show of its session: never the token.
type sessionView struct {
	CSRF       string
	Admin      bool
	Recipients string
	Unread     int
	// Follow lists, space-separated, the recipients the badge counts, and
	// Seen, in the same order, the seq through which it counted each (a
	// message event at or before it is in the count already).
	Follow, Seen string
	// After is the seq the page's event stream starts after ("" live).
	After string
}

var titles = map[string]string{"signin": "Sign in", "error": "Error", "list": "Watches", "detail": "Watch",
	"inbox": "Inbox", "admin": "Admin"}

var funcs = template.FuncMap{
	"rfc":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
}

// parseTemplates parses each page with the layout and the row.
func parseTemplates() map[string]*template.Template {
	out := map[string]*template.Template{}
	for name := range titles {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/row.html", "templates/"+name+".html"))
	}
	return out
}

// render writes a page: the layout with the session's view and d.
func (p *Panel) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, d any) {
	pd := pageData{Title: titles[name], Page: name, Data: d}
	if s != nil {
		v := &sessionView{CSRF: s.csrf, Admin: s.admin, Recipients: strings.Join(s.scope.Recipients, ", "), After: s.after}
		follow := p.followed(s)
		v.Follow = strings.Join(follow, " ")
		if n, last, err := p.unreadCounts(r, s); err == nil {
			v.Unread = n
			after, _ := strconv.ParseInt(s.after, 10, 64)
			seen := make([]string, len(follow))
			for i, rc := range follow {
				seen[i] = strconv.FormatInt(max(after, last[rc]), 10)
			}
			v.Seen = strings.Join(seen, " ")
		}
		pd.Session = v
	}
	var b bytes.Buffer
	if err := p.tmpl[name].ExecuteTemplate(&b, name+".html", pd); err != nil {
		p.log.ErrorContext(r.Context(), "rendering a panel page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(visible(b.Bytes()))
}
