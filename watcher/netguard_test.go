package watcher_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/watcher"
)

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr                string
		always, denyPrivate bool // refused by default; refused with DenyPrivate
	}{
		{"169.254.169.254", true, true},
		{"169.254.0.1", true, true},
		{"fe80::1", true, true},
		{"fd00:ec2::254", true, true},
		{"::ffff:169.254.169.254", true, true},
		{"64:ff9b::a9fe:a9fe", true, true}, // NAT64 of 169.254.169.254
		{"100.100.100.200", true, true},
		{"::ffff:100.100.100.200", true, true},
		{"::ffff:10.0.0.1", false, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"192.168.1.1", false, true},
		{"172.16.0.1", false, true},
		{"100.64.0.1", false, true},
		{"fd12::1", false, true},
		{"0.0.0.0", false, true},
		{"93.184.216.34", false, false},
		{"2606:4700::1111", false, false},
	}
	for _, tt := range tests {
		ip := netip.MustParseAddr(tt.addr)
		for _, deny := range []bool{false, true} {
			want := tt.always || (deny && tt.denyPrivate)
			err := watcher.Guard{DenyPrivate: deny}.Check(ip)
			var refused *watcher.AddrRefusedError
			if got := errors.As(err, &refused); got != want {
				t.Errorf("Guard{DenyPrivate: %v}.Check(%s) = %v, want refused %v", deny, tt.addr, err, want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.addr) {
				t.Errorf("Guard.Check(%s) error %q does not name the address", tt.addr, err)
			}
		}
	}
}

// TestGuardControlRefusesBeforeConnecting dials the metadata address with
// the guard: the Control func refuses it before any packet is sent, so the
// test needs no network and returns at once.
func TestGuardControlRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	d := net.Dialer{Timeout: 5 * time.Second, Control: watcher.Guard{}.Control}
	start := time.Now()
	conn, err := d.Dial("tcp", "169.254.169.254:80")
	if err == nil {
		conn.Close()
		t.Fatal("Dial(169.254.169.254:80) succeeded, want refused")
	}
	var refused *watcher.AddrRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Dial(169.254.169.254:80) = %v, want *AddrRefusedError", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Dial took %v: the guard should refuse before connecting", time.Since(start))
	}
}
