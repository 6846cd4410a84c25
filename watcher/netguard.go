package watcher

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Guard decides which network addresses a probe may connect to. Link-local
// addresses and cloud metadata endpoints are always refused; DenyPrivate
// also refuses loopback, private, shared (CGNAT) and unspecified addresses.
//
// Use Control as a net.Dialer's Control func: it runs after DNS resolution,
// on the very address about to be connected to, so a name that resolves to
// a refused address (DNS rebinding included) is refused before any packet
// is sent.
type Guard struct {
	// DenyPrivate also refuses loopback, private, CGNAT and unspecified
	// addresses.
	DenyPrivate bool
}

// Prefixes that are never probed: link-local (where cloud metadata services
// live) and the metadata endpoints that are not link-local.
var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
	}
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
)

// AddrRefusedError is the error of a connection the Guard refused.
type AddrRefusedError struct {
	// Addr is the refused address.
	Addr netip.Addr
	// Why says which rule refused it.
	Why string
}

// Error implements error.
func (e *AddrRefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s", e.Addr, e.Why)
}

// Check returns an *AddrRefusedError if ip must not be connected to.
func (g Guard) Check(ip netip.Addr) error {
	orig := ip
	ip = ip.Unmap()
	if nat64.Contains(ip) { // the IPv4 address a NAT64 gateway would reach
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:16]))
	}
	ip = ip.WithZone("")
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return &AddrRefusedError{Addr: orig, Why: "link-local addresses (cloud metadata services) are never probed"}
	}
	for _, m := range metadataAddrs {
		if ip == m {
			return &AddrRefusedError{Addr: orig, Why: "cloud metadata addresses are never probed"}
		}
	}
	if g.DenyPrivate {
		switch {
		case ip.IsLoopback():
			return &AddrRefusedError{Addr: orig, Why: "loopback addresses are denied by this daemon's private-address setting"}
		case ip.IsPrivate(), sharedSpace.Contains(ip):
			return &AddrRefusedError{Addr: orig, Why: "private addresses are denied by this daemon's private-address setting"}
		case ip.IsUnspecified():
			return &AddrRefusedError{Addr: orig, Why: "unspecified addresses are denied by this daemon's private-address setting"}
		}
	}
	return nil
}

// Admit refuses, as watch_unobservable, a host that is a literal IP
// address Check refuses: such a watch could never be observed. Host names
// are not resolved here (admission never touches the network); they are
// checked at every connect.
func (g Guard) Admit(host string) error {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	if err := g.Check(ip); err != nil {
		return Unobservable("%s", err.Error())
	}
	return nil
}

// Control is a net.Dialer Control func: it refuses, before connecting, an
// address Check refuses. address is the resolved "ip:port".
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an address", address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an IP address", address)
	}
	return g.Check(ip)
}
