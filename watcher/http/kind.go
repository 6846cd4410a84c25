package httpwatch

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind http: checked every 10 s, for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindHTTP,
		Spec:    vigil.KindSpec{Every: 10 * time.Second, Deadline: 30 * time.Minute},
		DueOnly: true,
		Doc: `{"url": "https://example.com/health", "done": {"path": "status", "equals": "ok"}} — accepted status 2xx unless "status" says otherwise; ` +
			`"fail" is a matcher that means it will never succeed`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"url":              "the http(s) URL to request",
			"method":           "GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS",
			"status":           `accepted statuses: codes and classes like ["2xx", 304]; default ["2xx"]`,
			"done":             "a matcher (or a list) on the JSON body that must hold as well",
			"fail":             "a matcher (or a list) on the JSON body that means it will never succeed",
			"timeout":          "timeout of one request, at most 60s; default 10s",
			"follow_redirects": "follow redirects (default true)",
		}),
		Subject: func(p map[string]any) string {
			m := watcher.SubjectString(p, "method")
			if m == "" {
				m = "GET"
			}
			return m + " " + watcher.SubjectString(p, "url")
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
