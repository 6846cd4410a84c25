package wire_test

import (
	"net/http"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

func TestPaths(t *testing.T) {
	for got, want := range map[string]string{
		wire.WatchPath("w/1", "/wait"):         "/v1/watches/w%2F1/wait",
		wire.RecipientPath("r@x", "/messages"): "/v1/recipients/r@x/messages",
		wire.TokenPath("t 1", "/revoke"):       "/v1/tokens/t%201/revoke",
		wire.CompletionPath("abc"):             "/v1/complete/abc",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	if got := wire.StatusOf(vigil.CodeNotFound); got != http.StatusNotFound {
		t.Errorf("not_found: %d", got)
	}
	if got := wire.StatusOf("no_such_code"); got != http.StatusInternalServerError || wire.Known("no_such_code") {
		t.Errorf("an unknown code: %d, want 500 and not known", got)
	}
	for _, c := range wire.Codes() {
		if !wire.Known(c) || wire.StatusOf(c) < 400 {
			t.Errorf("code %s: status %d", c, wire.StatusOf(c))
		}
	}
}
