package email_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// script is a small SMTP server on 127.0.0.1 that answers each command
// as its answers say (by the command's verb: "EHLO", "AUTH", "MAIL",
// "RCPT", "DATA", and "." for the end of the message text; "greeting"
// is its first line, after which it hangs up unless it is a 220), else as a
// server that takes the mail does. An answer "" drops the connection
// instead. It records the message text it was sent and the verbs.
type script struct {
	// addr is the address it listens on (default 127.0.0.1).
	addr    string
	answers map[string]string
	mu      sync.Mutex
	verbs   []string
	lines   []string // the commands, as sent
	data    []string
}

var scriptDefaults = map[string]string{
	"greeting": "220 localhost ESMTP script",
	"EHLO":     "250-localhost\r\n250-8BITMIME\r\n250 AUTH PLAIN",
	"HELO":     "250 localhost",
	"AUTH":     "235 2.7.0 Authentication successful",
	"MAIL":     "250 2.0.0 OK",
	"RCPT":     "250 2.0.0 OK",
	"DATA":     "354 Go ahead",
	".":        "250 2.0.0 OK: queued",
	"QUIT":     "221 2.0.0 Bye",
	"RSET":     "250 2.0.0 OK",
	"NOOP":     "250 2.0.0 OK",
}

// start serves s until the test ends, one connection at a time, and
// returns its port.
func (s *script) start(t *testing.T) int {
	t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
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
			s.serve(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *script) answer(verb string) (string, bool) {
	s.mu.Lock()
	s.verbs = append(s.verbs, verb)
	a, ok := s.answers[verb]
	s.mu.Unlock()
	if !ok {
		a, ok = scriptDefaults[verb]
		if !ok {
			a = "502 5.5.1 Unrecognized command"
		}
	}
	return a, a != ""
}

func (s *script) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(a string) bool {
		_, err := c.Write([]byte(a + "\r\n"))
		return err == nil
	}
	if g, ok := s.answer("greeting"); !ok || !say(g) || !strings.HasPrefix(g, "220") {
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		s.mu.Lock()
		s.lines = append(s.lines, line)
		s.mu.Unlock()
		verb, _, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		a, ok := s.answer(verb)
		if !ok || !say(a) {
			return
		}
		switch {
		case verb == "QUIT":
			return
		case verb == "DATA" && strings.HasPrefix(a, "354"):
			var text strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				text.WriteString(l)
			}
			s.mu.Lock()
			s.data = append(s.data, text.String())
			s.mu.Unlock()
			a, ok := s.answer(".")
			if !ok || !say(a) {
				return
			}
		}
	}
}

// saw returns the verbs of the commands the server was sent.
func (s *script) saw() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.verbs...)
}

// said returns the command lines the server was sent, those that start
// with prefix.
func (s *script) said(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// sent returns the message texts the server was sent.
func (s *script) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.data...)
}
