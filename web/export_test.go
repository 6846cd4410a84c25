package web

import "github.com/vigil-run/vigil"

// MaxSessions is how many sessions a panel keeps.
const MaxSessions = maxSessions

// OpenSessions opens n admin sessions, as n sign-ins would.
func (p *Panel) OpenSessions(n int) {
	for range n {
		p.newSession("", true, vigil.Scope{})
	}
}
