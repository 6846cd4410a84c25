package web

import (
	"strconv"

	"github.com/vigil-run/vigil"
)

// MaxSessions is how many sessions a panel keeps.
const MaxSessions = maxSessions

// OpenSessions opens n sessions of n scoped tokens, as n sign-ins with
// as many tokens would (one token keeps maxSessionsPerToken at most).
func (p *Panel) OpenSessions(n int) {
	for i := range n {
		id := "tok_" + strconv.Itoa(i)
		p.newSession("vgl_"+strconv.Itoa(i), false, vigil.Scope{TokenID: id})
	}
}

// MaxSessionsPerToken is how many sessions of one token a panel keeps.
const MaxSessionsPerToken = maxSessionsPerToken

// OpenSessionsOf opens n sessions of the scoped token, as n sign-ins with
// it would.
func (p *Panel) OpenSessionsOf(token string, scope vigil.Scope, n int) {
	for range n {
		p.newSession(token, false, scope)
	}
}
