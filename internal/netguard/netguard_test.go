package netguard_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/internal/netguard"
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
		// Every IPv6 form that carries an IPv4 address is judged by it.
		{"::169.254.169.254", true, true},                    // IPv4-compatible
		{"::ffff:0:169.254.169.254", true, true},             // IPv4-translated (SIIT)
		{"2002:a9fe:a9fe::", true, true},                     // 6to4
		{"2002:a9fe:a9fe:1:2:3:4:5", true, true},             // 6to4, a host in its site
		{"2002:6464:64c8::1", true, true},                    // 6to4 of 100.100.100.200
		{"64:ff9b:1::a9fe:a9fe", true, true},                 // local-use NAT64, /96
		{"64:ff9b:1:a9fe:a9:fe00::", true, true},             // local-use NAT64, /48
		{"64:ff9b:1:a9:fe:a9fe::", true, true},               // local-use NAT64, /56
		{"64:ff9b:1:0:a9:fea9:fe00:0", true, true},           // local-use NAT64, /64
		{"2001:0:a9fe:a9fe::1", true, true},                  // Teredo server
		{"2001:0:4136:e378:8000:63bf:5601:5601", true, true}, // Teredo client (obfuscated)
		{"2001:db8::5efe:a9fe:a9fe", true, true},             // ISATAP
		{"2001:db8::200:5efe:a9fe:a9fe", true, true},         // ISATAP, universal bit
		{"::127.0.0.1", false, true},
		{"2002:7f00:1::", false, true},
		{"2002:a00:1::", false, true},
		{"64:ff9b:1::a00:1", false, true},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", false, true},  // Teredo client 10.0.0.1
		{"2001:db8::5efe:c0a8:101", false, true},               // ISATAP 192.168.1.1
		{"2002:5db8:d822::", false, false},                     // 6to4 of a public address
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false}, // Teredo 65.54.227.120, 192.0.2.45
		{"2001:db8::1", false, false},
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
			err := netguard.Guard{DenyPrivate: deny}.Check(ip)
			var refused *netguard.AddrRefusedError
			if got := errors.As(err, &refused); got != want {
				t.Errorf("Guard{DenyPrivate: %v}.Check(%s) = %v, want refused %v", deny, tt.addr, err, want)
			}
			if err != nil && !strings.Contains(err.Error(), ip.String()) {
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
	d := net.Dialer{Timeout: 5 * time.Second, Control: netguard.Guard{}.Control}
	start := time.Now()
	conn, err := d.Dial("tcp", "169.254.169.254:80")
	if err == nil {
		conn.Close()
		t.Fatal("Dial(169.254.169.254:80) succeeded, want refused")
	}
	var refused *netguard.AddrRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Dial(169.254.169.254:80) = %v, want *AddrRefusedError", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Dial took %v: the guard should refuse before connecting", time.Since(start))
	}
}

// TestGuardAdmitSpellings: numeric spellings that resolvers read as IPv4
// addresses are refused at registration, naming the dotted form, and never
// handed to a resolver; a refused address says why as well.
func TestGuardAdmitSpellings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want string // "" admits; else the refusal names this
	}{
		{"2852039166", "169.254.169.254"},
		{"0251.0376.0251.0376", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0XA9FEA9FE", "169.254.169.254"},
		{"0xa9.0xfe.0xa9fe", "169.254.169.254"},
		{"169.16689662", "169.254.169.254"},
		{"169.254.43518", "169.254.169.254"},
		{"127.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"1.2.3", "1.2.0.3"},
		{"010.0.0.1", "8.0.0.1"},
		{"1572395042", "93.184.216.34"},
		{"169.254.169.254.", "169.254.169.254"},
		{"4294967296", "neither an IP address nor a host name"},
		{"1.2.3.4.5", "neither an IP address nor a host name"},
		{"1.2.3.256", "neither an IP address nor a host name"},
		{"08.1.1.1", "neither an IP address nor a host name"},
		{"example.com", ""},
		{"93.184.216.34", ""},
		{"123.example", ""},
		{"0x1.example", ""},
		{"1e3", ""},
		{"localhost", ""},
		{"2606:4700::1111", ""},
	}
	for _, tt := range tests {
		err := netguard.Guard{}.Admit(tt.host)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Admit(%q) = %v, want nil", tt.host, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.host) {
			t.Errorf("Admit(%q) = %v, want a refusal naming %q and the host", tt.host, err, tt.want)
		}
	}
	// A spelling of a refused address says why.
	if err := (netguard.Guard{}).Admit("2852039166"); err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("Admit(2852039166) = %v, want it to say link-local addresses are never probed", err)
	}
	if err := (netguard.Guard{}).Admit("1572395042"); err == nil || !strings.Contains(err.Error(), "write 93.184.216.34") {
		t.Errorf("Admit(1572395042) = %v, want it to say write 93.184.216.34", err)
	}
}
