package tcp_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/tcp"
)

func canon(t *testing.T, w *tcp.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func probe(t *testing.T, w *tcp.Watcher, pred json.RawMessage) vigil.Observation {
	t.Helper()
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindTCP, Predicate: pred})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	obs.At = time.Time{}
	return obs
}

func TestProbe(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	w := tcp.New(tcp.Config{})
	open := ln.Addr().String()
	tests := []struct {
		name string
		w    *tcp.Watcher
		pred string
		want vigil.Observation
	}{
		{"listening is satisfied", w, `{"address":"` + open + `","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "connected to " + open, Facts: map[string]any{"address": open}}},
		{"closed port is pending", w, `{"address":"` + closedAddr + `","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "nothing listening on " + closedAddr, Facts: map[string]any{"address": closedAddr}}},
		{"link-local is refused for good", w, `{"address":"169.254.169.254:80","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true,
				Reason: "169.254.169.254:80: refused to connect to 169.254.169.254: link-local addresses (cloud metadata services) are never probed"}},
		{"loopback is refused when private addresses are denied", tcp.New(tcp.Config{DenyPrivate: true}), `{"address":"` + open + `","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true,
				Reason: open + ": refused to connect to 127.0.0.1: loopback addresses are denied by this daemon's private-address setting"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probe(t, tt.w, canon(t, tt.w, tt.pred))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Probe(%s) (-want +got):\n%s", tt.pred, diff)
			}
		})
	}
}

func TestUnresolvableIsUnavailable(t *testing.T) {
	t.Parallel()
	w := tcp.New(tcp.Config{})
	got := probe(t, w, canon(t, w, `{"address":"no-such-host.invalid:80","timeout":"1s"}`))
	if got.Verdict != vigil.VerdictUnavailable || got.Permanent || !strings.Contains(got.Reason, "no-such-host.invalid") {
		t.Errorf("Probe(unresolvable) = %+v, want transient unavailable naming the host", got)
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"address":"DB.Example.COM:0080"}`, `{"address":"db.example.com:80","timeout":"3s"}`},
		{`{"address":"db.example.com.:5432","timeout":"1500ms"}`, `{"address":"db.example.com:5432","timeout":"1.5s"}`},
		{`{"address":"[::0001]:443","timeout":"60s"}`, `{"address":"[::1]:443","timeout":"1m"}`},
		{`{"address":"10.0.0.1:22"}`, `{"address":"10.0.0.1:22","timeout":"3s"}`},
	}
	w := tcp.New(tcp.Config{})
	for _, tt := range tests {
		if got := canon(t, w, tt.in); string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, field string }{
		{`{}`, "predicate.address"},
		{`{"address":"example.com"}`, "predicate.address"},
		{`{"address":"example.com:0"}`, "predicate.address"},
		{`{"address":"example.com:65536"}`, "predicate.address"},
		{`{"address":"example.com:http"}`, "predicate.address"},
		{`{"address":":80"}`, "predicate.address"},
		{`{"address":"bad host:80"}`, "predicate.address"},
		{`{"address":"::1:80"}`, "predicate.address"},
		{`{"address":"[fe80::1%eth0]:80"}`, "predicate.address"},
		{`{"address":"a.b:80","timeout":"2m"}`, "predicate.timeout"},
		{`{"address":"a.b:80","port":80}`, "predicate.port"},
	}
	w := tcp.New(tcp.Config{})
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field {
			t.Errorf("Canonicalize(%s) = %v (field %q), want invalid_predicate on %s", tt.in, err, vigil.ErrorField(err), tt.field)
		}
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address     string
		denyPrivate bool
		refused     bool
	}{
		{"169.254.169.254:80", false, true},
		{"[fd00:ec2::254]:80", false, true},
		{"127.0.0.1:5432", false, false},
		{"127.0.0.1:5432", true, true},
		{"db.internal:5432", true, false},
		{"[::169.254.169.254]:80", false, true},
		{"[2002:a9fe:a9fe::]:80", false, true},
		{"2852039166:80", false, true},
		{"127.1:5432", false, true},
	}
	for _, tt := range tests {
		w := tcp.New(tcp.Config{DenyPrivate: tt.denyPrivate})
		err := w.Admit(context.Background(), canon(t, w, `{"address":"`+tt.address+`"}`))
		if got := vigil.ErrorCode(err) == vigil.CodeWatchUnobservable; got != tt.refused || (err != nil && !got) {
			t.Errorf("Admit(%s, DenyPrivate %v) = %v, want refused %v", tt.address, tt.denyPrivate, err, tt.refused)
		}
	}
}
