package httpwatch_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// fakeDNS is a resolver whose every A answer is addr, over an in-memory
// stream connection: no network, no system configuration.
func fakeDNS(addr netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, addr)
		return client, nil
	}}
}

// serveDNS answers DNS queries in TCP framing (a 2-byte length first): an
// A question gets addr, anything else no answer.
func serveDNS(c net.Conn, addr netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
			return
		}
		// The question: name labels up to the zero byte, then type, class.
		end := 12
		for end < len(q) && q[end] != 0 {
			end += int(q[end]) + 1
		}
		end += 5
		if end > len(q) {
			return
		}
		qtype := binary.BigEndian.Uint16(q[end-4:])
		resp := append([]byte{}, q[:2]...)    // id
		resp = append(resp, 0x81, 0x80, 0, 1) // response, recursion; one question
		if qtype == 1 && addr.Is4() {
			resp = append(resp, 0, 1) // one answer
		} else {
			resp = append(resp, 0, 0)
		}
		resp = append(resp, 0, 0, 0, 0)
		resp = append(resp, q[12:end]...)
		if qtype == 1 && addr.Is4() {
			ip := addr.As4()
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, ip[:]...)
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(resp)))
		if _, err := c.Write(append(n[:], resp...)); err != nil {
			return
		}
	}
}

// TestHostnameResolvingToMetadata: a name that resolves to the metadata
// address is refused at connect time, with the reason in the observation
// (what why shows), for good.
func TestHostnameResolvingToMetadata(t *testing.T) {
	t.Parallel()
	w := httpwatch.New(httpwatch.Config{Resolver: fakeDNS(netip.MustParseAddr("169.254.169.254"))})
	got := probe(t, w, canon(t, w, `{"url":"http://metadata.example.test/latest/meta-data/","timeout":"2s"}`))
	if got.Verdict != vigil.VerdictUnavailable || !got.Permanent ||
		!strings.Contains(got.Reason, "refused to connect to 169.254.169.254: link-local addresses (cloud metadata services) are never probed") {
		t.Errorf("Probe(name resolving to 169.254.169.254) = %+v, want a permanent refusal naming the address", got)
	}
}

// TestHostnameResolvingToLoopbackDenyPrivate: with DenyPrivate, a name
// resolving to loopback is refused too; without it, the same name is
// reached (the resolver is really used).
func TestHostnameResolvingToLoopbackDenyPrivate(t *testing.T) {
	t.Parallel()
	srv := server(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	pred := `{"url":"http://internal.example.test:` + port + `/ready"}`
	open := httpwatch.New(httpwatch.Config{Resolver: fakeDNS(netip.MustParseAddr("127.0.0.1"))})
	if got := probe(t, open, canon(t, open, pred)); got.Verdict != vigil.VerdictSatisfied {
		t.Fatalf("Probe(name resolving to loopback) = %+v, want it reached", got)
	}
	deny := httpwatch.New(httpwatch.Config{DenyPrivate: true, Resolver: fakeDNS(netip.MustParseAddr("127.0.0.1"))})
	if got := probe(t, deny, canon(t, deny, pred)); !got.Permanent || !strings.Contains(got.Reason, "refused to connect to 127.0.0.1: loopback") {
		t.Errorf("Probe(name resolving to loopback, DenyPrivate) = %+v, want a permanent refusal", got)
	}
}
