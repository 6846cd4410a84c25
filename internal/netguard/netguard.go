// Package netguard decides which network addresses vigil may connect to:
// the http and tcp kinds' probes and webhook deliveries all dial through
// its Guard.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/vigil-run/vigil"
)

// Guard decides which network addresses a probe may connect to. Link-local
// addresses and cloud metadata endpoints are always refused; DenyPrivate
// also refuses loopback, private, shared (CGNAT) and unspecified addresses.
// An IPv6 address that carries an IPv4 address (IPv4-mapped and
// -compatible, SIIT, 6to4, NAT64, Teredo, ISATAP) is refused when the IPv4
// address it carries would be.
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
// live) and the metadata endpoints that are not link-local; and the IPv6
// prefixes whose addresses carry an IPv4 address.
var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
	}
	sharedSpace  = netip.MustParsePrefix("100.64.0.0/10")
	compatible   = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated)
	translated   = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT, RFC 2765
	sixToFour    = netip.MustParsePrefix("2002::/16")       // RFC 3056
	nat64        = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	teredo       = netip.MustParsePrefix("2001::/32")       // RFC 4380
	ipv6Loopback = netip.IPv6Loopback()
	ipv6Unspec   = netip.IPv6Unspecified()
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
	ip = ip.Unmap().WithZone("")
	if why := g.why(ip); why != "" {
		return &AddrRefusedError{Addr: orig, Why: why}
	}
	for _, e := range embedded(ip) {
		if why := g.why(e.v4); why != "" {
			return &AddrRefusedError{Addr: orig, Why: fmt.Sprintf("it carries the IPv4 address %s (%s), and %s", e.v4, e.form, why)}
		}
	}
	return nil
}

// why says which rule refuses ip, or "" if none does.
func (g Guard) why(ip netip.Addr) string {
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return "link-local addresses (cloud metadata services) are never probed"
	}
	for _, m := range metadataAddrs {
		if ip == m {
			return "cloud metadata addresses are never probed"
		}
	}
	if g.DenyPrivate {
		switch {
		case ip.IsLoopback():
			return "loopback addresses are denied by this daemon's private-address setting"
		case ip.IsPrivate(), sharedSpace.Contains(ip):
			return "private addresses are denied by this daemon's private-address setting"
		case ip.IsUnspecified():
			return "unspecified addresses are denied by this daemon's private-address setting"
		}
	}
	return ""
}

// carried is an IPv4 address an IPv6 address carries, and the form that
// carries it.
type carried struct {
	v4   netip.Addr
	form string
}

// embedded returns the IPv4 addresses that the IPv6 address ip carries:
// where a packet to ip may end up going over IPv4. An address in the
// local-use NAT64 prefix yields one candidate per prefix length RFC 6052
// allows there, since the operator's choice is not known here.
func embedded(ip netip.Addr) []carried {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	var out []carried
	switch {
	case compatible.Contains(ip) && ip != ipv6Loopback && ip != ipv6Unspec:
		out = append(out, carried{v4(12, 13, 14, 15), "IPv4-compatible"})
	case translated.Contains(ip):
		out = append(out, carried{v4(12, 13, 14, 15), "IPv4-translated"})
	case sixToFour.Contains(ip):
		out = append(out, carried{v4(2, 3, 4, 5), "6to4"})
	case nat64.Contains(ip):
		out = append(out, carried{v4(12, 13, 14, 15), "NAT64"})
	case nat64Local.Contains(ip):
		out = append(out,
			carried{v4(6, 7, 9, 10), "local-use NAT64"},
			carried{v4(7, 9, 10, 11), "local-use NAT64"},
			carried{v4(9, 10, 11, 12), "local-use NAT64"},
			carried{v4(12, 13, 14, 15), "local-use NAT64"})
	case teredo.Contains(ip):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		out = append(out, carried{v4(4, 5, 6, 7), "Teredo server"}, carried{client, "Teredo client"})
	}
	// ISATAP: an interface identifier of [0000|0200]:5efe followed by the
	// IPv4 address, under any prefix.
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, carried{v4(12, 13, 14, 15), "ISATAP"})
	}
	return out
}

// Admit refuses, as watch_unobservable, a host that is a literal IP
// address Check refuses: such a watch could never be observed. It also
// refuses a host that resolvers would read as an IPv4 address although it
// is not written as one ("2852039166", "0xa9fea9fe", "0251.0376.0251.0376",
// "127.1"), naming the address, and a host whose last label is a number
// (no host name ends so). Host names are not resolved here (admission never
// touches the network); they are checked at every connect.
func (g Guard) Admit(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := g.Check(ip); err != nil {
			return unobservable("%s", err.Error())
		}
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	// A trailing dot ("169.254.169.254.") is another spelling too.
	if ip, ok := looseIPv4(name); ok {
		if err := g.Check(ip); err != nil {
			return unobservable("host %q is %s in another spelling: %s", host, ip, err.Error())
		}
		return unobservable("host %q is %s in another spelling, which resolvers read differently; write %s", host, ip, ip)
	}
	if last := name[strings.LastIndexByte(name, '.')+1:]; last != "" && strings.Trim(last, "0123456789") == "" {
		return unobservable("host %q is neither an IP address nor a host name: a host name does not end in a number", host)
	}
	return nil
}

// looseIPv4 reads s as inet_aton(3) does: one to four parts, each decimal,
// octal (a leading 0) or hexadecimal (a leading 0x), the last filling the
// bits the others leave ("127.1" is 127.0.0.1, "2852039166" is
// 169.254.169.254).
func looseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0" // inet_aton reads "0x" as 0
			}
		case len(p) >= 2 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" || digits[0] == '+' {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	// Every part but the last is one byte; the last fills the rest.
	var n uint64
	for _, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n = n<<8 | v
	}
	rest := uint(8 * (5 - len(vals)))
	last := vals[len(vals)-1]
	if last >= 1<<rest {
		return netip.Addr{}, false
	}
	n = n<<rest | last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
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

// unobservable is Admit's refusal: a watch_unobservable error.
func unobservable(format string, args ...any) error {
	return vigil.Errorf(vigil.CodeWatchUnobservable, format, args...)
}
