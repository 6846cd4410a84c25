package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/vigil-run/vigil"
)

// hosts decides which Host and Origin headers the server answers, against
// DNS rebinding: a page on a name its author controls, resolved to this
// machine, reaches the daemon with that name as its Host and its own
// origin as its Origin.
type hosts struct {
	// names are the host names a Host may name, lower-cased: the loopback
	// names, the listen address's host and the operator's.
	names map[string]bool
	// trusted are the operator's names: an Origin on one of them is
	// trusted too.
	trusted map[string]bool
	// anyIP lets a Host name any IP address (listening on every
	// interface): an address is not a name anyone can rebind.
	anyIP bool
}

func newHosts(listen string, allowed []string) hosts {
	h := hosts{names: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}, trusted: map[string]bool{}}
	if listen != "" {
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			host = listen
		}
		ip, err := netip.ParseAddr(host)
		switch {
		case host == "", err == nil && ip.IsUnspecified():
			h.anyIP = true
		case err == nil:
			h.names[ip.WithZone("").String()] = true
		default:
			h.names[strings.ToLower(host)] = true
		}
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.Trim(strings.TrimSpace(a), "[]"))
		if a != "" {
			h.names[a], h.trusted[a] = true, true
		}
	}
	return h
}

// hostName returns the host of a Host header value, without its port or
// brackets, lower-cased.
func hostName(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// allows reports whether a request may name host (a Host header value).
// A request without a Host (HTTP/1.0) names nothing a page could rebind.
func (h hosts) allows(hostport string) bool {
	if hostport == "" {
		return true
	}
	name := hostName(hostport)
	if h.names[name] {
		return true
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		return h.anyIP || h.names[ip.WithZone("").String()]
	}
	return false
}

// checkHost refuses a request whose Host the server does not answer to.
func (s *Server) checkHost(r *http.Request) error {
	if s.hosts.allows(r.Host) {
		return nil
	}
	return vigil.Errorf(vigil.CodeForbidden,
		"this vigil does not answer to the host name %q (a guard against DNS rebinding); "+
			"if it is the daemon's own name, add it to allowed_hosts (VIGIL_ALLOWED_HOSTS)", clip(hostName(r.Host)))
}

// safeMethod reports whether a request with method m changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkOrigin refuses a request a browser sent from another origin: one
// whose Origin is not this server's own (its Host, or an allowed host
// name), or, without an Origin, whose Sec-Fetch-Site says it came from
// another site. A program (the CLI, an agent) sends neither and passes.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		switch site := r.Header.Get("Sec-Fetch-Site"); site {
		case "", "same-origin", "none":
			return nil
		default:
			return vigil.Errorf(vigil.CodeForbidden, "a request from another origin (Sec-Fetch-Site: %s) is refused here", clip(site))
		}
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		if s.hosts.trusted[hostName(u.Host)] || (strings.EqualFold(u.Host, r.Host) && u.Scheme == requestScheme(r)) {
			return nil
		}
	}
	return vigil.Errorf(vigil.CodeForbidden,
		"a request from another origin (%q) is refused here (a guard against DNS rebinding and cross-site requests); "+
			"an origin on a host name in allowed_hosts (VIGIL_ALLOWED_HOSTS) is trusted", clip(origin))
}

// requestScheme is the scheme the request came in with.
func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// sameOrigin checks the Origin of every request to h, whatever its method:
// for mounted handlers (MCP), whose GET opens a stream and whose
// specification asks servers to validate Origin on every request.
func (s *Server) sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkOrigin(r); err != nil {
			s.fail(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
