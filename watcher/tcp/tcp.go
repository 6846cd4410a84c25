// Package tcp is the watcher for kind tcp: a watch that is satisfied when a
// TCP connection to an address opens.
//
// The predicate:
//
//	{"address": "db.internal:5432", "timeout": "3s"}
//
// address is host:port with a numeric port from 1 to 65535; the host is a
// DNS name or an IP address (IPv6 in brackets). timeout bounds one connect
// attempt: 3s by default, at most 60s. The canonical form has both fields,
// the host lowercased, the port without leading zeros and the timeout in
// its shortest spelling:
//
//	{"address": "db.internal:5432", "timeout": "3s"}
//
// A probe connects once and closes the connection at once. An open
// connection is satisfied; a refused connection is pending ("nothing
// listening"); a DNS failure, a timeout or an unreachable network is
// unavailable. Link-local and cloud metadata addresses are never connected
// to (see watcher.Guard), checked on the resolved address; with
// Config.DenyPrivate, nor loopback or private ones. Admit refuses at
// registration an address whose host is a literal address that would be
// refused.
package tcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Defaults and bounds.
const (
	DefaultTimeout = 3 * time.Second
	MaxTimeout     = 60 * time.Second
	// MaxHost bounds the host part of an address (the DNS limit).
	MaxHost = 253
)

// Config configures the tcp watcher.
type Config struct {
	// DenyPrivate refuses loopback, private and CGNAT addresses too.
	DenyPrivate bool
}

// Watcher answers tcp watches.
type Watcher struct {
	guard watcher.Guard
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a tcp watcher.
func New(cfg Config) *Watcher {
	return &Watcher{guard: watcher.Guard{DenyPrivate: cfg.DenyPrivate}}
}

type predicate struct {
	Address string `json:"address"`
	Timeout string `json:"timeout,omitempty"`
}

type spec struct {
	address string
	timeout time.Duration
}

// Kind returns vigil.KindTCP.
func (*Watcher) Kind() vigil.Kind { return vigil.KindTCP }

// Canonicalize validates the address and timeout and fills the default timeout.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(predicate{Address: s.address, Timeout: vigil.FormatDuration(s.timeout)})
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

func parse(raw json.RawMessage) (spec, error) {
	var p predicate
	if err := watcher.Decode(raw, "", &p); err != nil {
		return spec{}, err
	}
	addr, err := CanonicalAddress(p.Address, "address")
	if err != nil {
		return spec{}, err
	}
	timeout, err := watcher.DurationField("timeout", p.Timeout, DefaultTimeout, MaxTimeout)
	if err != nil {
		return spec{}, err
	}
	return spec{address: addr, timeout: timeout}, nil
}

// CanonicalAddress validates a host:port address and returns its one
// spelling: host lowercased (IPv6 in brackets, in its shortest form), port
// numeric without leading zeros. Refusals name field.
func CanonicalAddress(address, field string) (string, error) {
	if address == "" {
		return "", watcher.InvalidPredicate(field, "is required: give host:port")
	}
	if len(address) > MaxHost+8 {
		return "", watcher.InvalidPredicate(field, "is too long")
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", watcher.InvalidPredicate(field, "must be host:port (an IPv6 host in brackets)")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.ContainsAny(port, "+-") {
		return "", watcher.InvalidPredicate(field, "must have a numeric port from 1 to 65535")
	}
	if host == "" {
		return "", watcher.InvalidPredicate(field, "must name a host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", watcher.InvalidPredicate(field, "must not carry an IPv6 zone")
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(n)), nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !validHostname(host) {
		return "", watcher.InvalidPredicate(field, "has an invalid host name %q", watcher.Clip(host, 64))
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

func validHostname(h string) bool {
	if h == "" || len(h) > MaxHost {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Admit refuses an address whose host is a literal IP address the daemon
// never connects to. Host names are checked at connect time, on every probe.
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	s, err := parse(predicate)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(s.address)
	if err != nil {
		return watcher.InvalidPredicate("address", "must be host:port")
	}
	return w.guard.Admit(host)
}

// Probe connects once.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindTCP); err != nil {
		return vigil.Observation{}, err
	}
	s, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored tcp predicate is invalid: %w", err))
	}
	facts := map[string]any{"address": s.address}
	d := net.Dialer{Timeout: s.timeout, Control: w.guard.Control}
	conn, err := d.DialContext(ctx, "tcp", s.address)
	if err == nil {
		_ = conn.Close()
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "connected to " + s.address, Facts: facts}, nil
	}
	var refused *watcher.AddrRefusedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &refused):
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("%s: %w", s.address, refused))
	case errors.Is(err, syscall.ECONNREFUSED):
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "nothing listening on " + s.address, Facts: facts}, nil
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return vigil.Observation{}, fmt.Errorf("could not resolve %s: no such host", dnsErr.Name)
		}
		return vigil.Observation{}, fmt.Errorf("could not resolve %s: %s", dnsErr.Name, dnsErr.Err)
	case isTimeout(err):
		return vigil.Observation{}, fmt.Errorf("no answer from %s within %s", s.address, vigil.FormatDuration(s.timeout))
	case ctx.Err() != nil:
		return vigil.Observation{}, fmt.Errorf("connecting to %s: %w", s.address, ctx.Err())
	}
	return vigil.Observation{}, fmt.Errorf("could not connect to %s: %w", s.address, unwrapOp(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapOp drops the "dial tcp a:b:" prefix of a *net.OpError, which
// repeats the address.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
