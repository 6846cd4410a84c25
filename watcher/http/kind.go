package httpwatch

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind http: checked every 10 s, for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindHTTP,
		New:     fromDeps,
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
		CLI: watcher.CLI{
			Use:   "http URL",
			Short: "Watch an HTTP endpoint's status and JSON body",
			Long: `Watch an HTTP endpoint. It is done when the status is accepted (default any
2xx) and, if given, the done matcher holds on the JSON body; it has failed
when the fail matcher holds. For other matchers (contains, gt, …) use
--predicate with "done"/"fail".`,
			Examples: []string{"vigil add http https://example.com/health --done-path status --done-equals ok"},
			MaxArgs:  1,
			Flags: append([]watcher.Flag{
				{Name: "method", Type: watcher.FlagString, Usage: "HTTP method (default GET)"},
				{Name: "status", Type: watcher.FlagStringSlice, Usage: "accepted statuses, like 200,204 or 2xx (default 2xx)"},
				{Name: "header", Type: watcher.FlagStringArray, Usage: `request header "Name: value" (repeatable)`},
				{Name: "body", Type: watcher.FlagString, Usage: "request body"},
				{Name: "timeout", Type: watcher.FlagString, Usage: "timeout of one request (default 10s)"},
			}, append(matcherFlags("done"), matcherFlags("fail")...)...),
			Build: buildCLI,
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// matcherFlags are --NAME-path and --NAME-equals (NAME done or fail).
func matcherFlags(name string) []watcher.Flag {
	return []watcher.Flag{
		{Name: name + "-path", Type: watcher.FlagString, Usage: "GJSON path in the JSON body that decides " + name + " (with --" + name +
			"-equals; alone: the value there is truthy: true, a non-zero number, a non-empty string, array or object)"},
		{Name: name + "-equals", Type: watcher.FlagString, Usage: "value at --" + name + "-path, as JSON (3, true, \"3\") or else a string"},
	}
}

// applyMatcher sets the matcher NAME in p, if the flags give one.
func applyMatcher(p map[string]any, in watcher.CLIInput, name string) error {
	path, hasEq := in.Flags.String(name+"-path"), in.Flags.Changed(name+"-equals")
	if path == "" {
		if hasEq {
			return fmt.Errorf("--%s-equals needs --%s-path", name, name)
		}
		return nil
	}
	m := map[string]any{"path": path}
	if hasEq {
		m["equals"] = watcher.JSONValue(in.Flags.String(name + "-equals"))
	} else {
		// A path alone asks for a truthy value: {"done": false} is not done.
		m["truthy"] = true
	}
	p[name] = m
	return nil
}

func buildCLI(p map[string]any, in watcher.CLIInput) error {
	if len(in.Args) == 1 {
		p["url"] = in.Args[0]
	} else if p["url"] == nil {
		return errors.New("give the URL to watch: vigil add http URL")
	}
	watcher.SetString(p, in, "method", "method")
	watcher.SetString(p, in, "body", "body")
	watcher.SetString(p, in, "timeout", "timeout")
	if status := in.Flags.Strings("status"); len(status) > 0 {
		var codes []any
		for _, s := range status {
			if n, err := strconv.Atoi(s); err == nil {
				codes = append(codes, n)
			} else {
				codes = append(codes, s)
			}
		}
		p["status"] = codes
	}
	if headers := in.Flags.Strings("header"); len(headers) > 0 {
		h := map[string]any{}
		given := map[string]bool{}
		for _, kv := range headers {
			k, v, ok := strings.Cut(kv, ":")
			if !ok || strings.TrimSpace(k) == "" {
				return fmt.Errorf("--header %q: want \"Name: value\"", kv)
			}
			k = strings.TrimSpace(k)
			// One value per header: a second would replace the first.
			key := http.CanonicalHeaderKey(k)
			if given[key] {
				return fmt.Errorf("--header %s is given twice (header names are case-insensitive); give it once", k)
			}
			given[key] = true
			h[k] = strings.TrimSpace(v)
		}
		p["headers"] = h
	}
	if err := applyMatcher(p, in, "done"); err != nil {
		return err
	}
	return applyMatcher(p, in, "fail")
}

// fromDeps builds the watcher the daemon registers, with the daemon's
// deny_private.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{DenyPrivate: d.DenyPrivate})
}
