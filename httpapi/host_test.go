package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// TestHostRefused: against DNS rebinding, every route refuses a Host that
// is not loopback, the listen address or an allowed host name, with 403
// forbidden and a sentence; the port does not matter.
func TestHostRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    func(*httpapi.Options)
		host    string
		refused bool
	}{
		{"localhost", nil, "localhost:7474", false},
		{"localhost without a port", nil, "localhost", false},
		{"localhost in capitals", nil, "LocalHost:1", false},
		{"IPv4 loopback", nil, "127.0.0.1:9", false},
		{"IPv6 loopback", nil, "[::1]:9", false},
		{"a foreign name", nil, "evil.example.com", true},
		{"a foreign name with a port", nil, "evil.example.com:7474", true},
		{"a name ending in localhost", nil, "localhost.evil.example.com", true},
		{"another loopback address", nil, "127.0.0.2:7474", true},
		{"another IP address", nil, "10.0.0.5:7474", true},
		{"an allowed name", allow("vigil.example.com"), "vigil.example.com", false},
		{"an allowed name, other case, with a port", allow("vigil.example.com"), "Vigil.Example.COM:443", false},
		{"a subdomain of an allowed name", allow("vigil.example.com"), "x.vigil.example.com", true},
		{"the listen address", listen("192.168.1.5:7474"), "192.168.1.5:7474", false},
		{"not the listen address", listen("192.168.1.5:7474"), "192.168.1.6:7474", true},
		{"the IPv6 listen address", listen("[2001:db8::5]:7474"), "[2001:db8::5]:7474", false},
		{"any address when listening on all", listen("0.0.0.0:7474"), "10.1.2.3:7474", false},
		{"any IPv6 address when listening on all", listen("[::]:7474"), "[2001:db8::9]", false},
		{"a name when listening on all", listen(":7474"), "evil.example.com:7474", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*httpapi.Options)
			if tt.opts != nil {
				opts = append(opts, tt.opts)
			}
			e := newEnv(t, opts...)
			e.api.Mount("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "mcp") }))
			for _, r := range []request{
				{method: "GET", path: "/healthz"},
				{method: "GET", path: "/openapi.json"},
				{method: "GET", path: "/v1/watches"},
				{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"r"}`},
				{method: "POST", path: "/mcp", body: `{}`},
				{method: "GET", path: "/no/such/route"},
			} {
				if r.header == nil {
					r.header = map[string]string{}
				}
				r.header["Host"] = tt.host
				resp, b := e.do(t, r)
				if !tt.refused {
					if resp.StatusCode == http.StatusForbidden {
						t.Errorf("%s %s with Host %q = 403 %s, want it served", r.method, r.path, tt.host, b)
					}
					continue
				}
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s with Host %q = %d, want 403", r.method, r.path, tt.host, resp.StatusCode)
					continue
				}
				got := decodeError(t, b)
				if got.Code != vigil.CodeForbidden || !strings.Contains(got.Message, "allowed_hosts") {
					t.Errorf("%s %s with Host %q = %+v, want forbidden naming allowed_hosts", r.method, r.path, tt.host, got)
				}
			}
			if tt.refused { // the event stream too (bounded: an accepted stream would not end)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/events?watch=w1", nil)
				req.Host = tt.host
				req.Header.Set("Authorization", "Bearer "+adminToken)
				resp, err := e.ts.Client().Do(req)
				if err != nil {
					t.Fatalf("GET /v1/events with Host %q: %v", tt.host, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("GET /v1/events with Host %q = %d, want 403", tt.host, resp.StatusCode)
				}
			}
		})
	}
}

// TestOriginRefused: a cross-origin request is refused on /mcp whatever
// its method, and on every state-changing request; a read from another
// origin is not (the browser does not let the page read the answer).
func TestOriginRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, allow("vigil.example.com"))
	e.api.Mount("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "mcp") }))
	host := strings.TrimPrefix(e.ts.URL, "http://")
	tests := []struct {
		method, path, body string
		header             map[string]string
		refused            bool
	}{
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "http://evil.example.com"}, true},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "null"}, true},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "http://localhost:3000"}, true},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "https://" + host}, true},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"DELETE", "/v1/watches/w1", "", map[string]string{"Origin": "http://evil.example.com"}, true},
		{"POST", "/v1/complete/tok", `{"status":"success"}`, map[string]string{"Origin": "http://evil.example.com"}, true},
		{"GET", "/mcp", "", map[string]string{"Origin": "http://evil.example.com"}, true},
		{"POST", "/mcp", `{}`, map[string]string{"Origin": "http://evil.example.com"}, true},
		{"DELETE", "/mcp", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		// Same origin, no origin (a program), or an operator-allowed one.
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "http://" + host}, false},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "http://" + strings.ToUpper(host)}, false},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, nil, false},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Sec-Fetch-Site": "same-origin"}, false},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"POST", "/v1/watches", `{"kind":"timer","recipient":"r"}`, map[string]string{"Origin": "https://vigil.example.com"}, false},
		{"GET", "/mcp", "", map[string]string{"Origin": "http://" + host}, false},
		{"GET", "/v1/watches", "", map[string]string{"Origin": "http://evil.example.com"}, false},
	}
	for _, tt := range tests {
		resp, b := e.do(t, request{method: tt.method, path: tt.path, body: tt.body, header: tt.header})
		if !tt.refused {
			if resp.StatusCode == http.StatusForbidden {
				t.Errorf("%s %s %v = 403 %s, want it served", tt.method, tt.path, tt.header, b)
			}
			continue
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s %v = %d %s, want 403", tt.method, tt.path, tt.header, resp.StatusCode, b)
			continue
		}
		if got := decodeError(t, b); got.Code != vigil.CodeForbidden || !strings.Contains(got.Message, "origin") {
			t.Errorf("%s %s %v = %+v, want forbidden naming the origin", tt.method, tt.path, tt.header, got)
		}
	}
}

func allow(hosts ...string) func(*httpapi.Options) {
	return func(o *httpapi.Options) { o.AllowedHosts = hosts }
}

func listen(addr string) func(*httpapi.Options) {
	return func(o *httpapi.Options) { o.ListenAddr = addr }
}
