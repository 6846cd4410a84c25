package storetest

import (
	"context"
	"errors"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/vigil-run/vigil"
)

func newToken(id, plaintext string, recipients ...string) *vigil.Token {
	return &vigil.Token{ID: id, Hash: vigil.HashToken(plaintext), Recipients: recipients, CreatedAt: base}
}

// testTokens: a token round-trips whole (never its plaintext), is found by
// id and by hash, survives a restart, and revocation keeps its first time.
func testTokens(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	s, reopen := newStore(t)
	full := &vigil.Token{ID: "tok-1", Hash: vigil.HashToken("vgl_one"), Recipients: []string{"a", "b"},
		Kinds: []vigil.Kind{vigil.KindHTTP, vigil.KindCommand}, Repos: []string{"github/acme/*", "gitlab/group/**"}, Exec: true, CreatedAt: base,
		ExpiresAt: base.Add(720 * 3600e9), Secret: "vgl_one"}
	if err := s.TokenCreate(ctx, vigil.TokenCreateParams{Token: full}); err != nil {
		t.Fatalf("TokenCreate: %v", err)
	}
	if err := s.TokenCreate(ctx, vigil.TokenCreateParams{Token: newToken("tok-2", "vgl_two", "c")}); err != nil {
		t.Fatalf("TokenCreate: %v", err)
	}
	want := *full
	want.Secret = ""
	for name, get := range map[string]func() (*vigil.Token, error){
		"TokenGet":       func() (*vigil.Token, error) { return s.TokenGet(ctx, "tok-1") },
		"TokenGetByHash": func() (*vigil.Token, error) { return s.TokenGetByHash(ctx, vigil.HashToken("vgl_one")) },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := gocmp.Diff(&want, got, opts); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := s.TokenGet(ctx, "nope"); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("TokenGet(nope) = %v, want not_found", err)
	}
	if _, err := s.TokenGetByHash(ctx, vigil.HashToken("vgl_nope")); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("TokenGetByHash(nope) = %v, want not_found", err)
	}

	s = reopen()
	got, err := s.TokenRevoke(ctx, vigil.TokenRevokeParams{ID: "tok-2", RevokedAt: base.Add(60e9)})
	if err != nil {
		t.Fatalf("TokenRevoke: %v", err)
	}
	if !got.RevokedAt.Equal(base.Add(60e9)) {
		t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, base.Add(60e9))
	}
	again, err := s.TokenRevoke(ctx, vigil.TokenRevokeParams{ID: "tok-2", RevokedAt: base.Add(120e9)})
	if err != nil || !again.RevokedAt.Equal(base.Add(60e9)) {
		t.Errorf("second TokenRevoke = %v, %v; want the first time kept", again, err)
	}
	if _, err := s.TokenRevoke(ctx, vigil.TokenRevokeParams{ID: "nope", RevokedAt: base}); !errors.Is(err, vigil.ErrNotFound) {
		t.Errorf("TokenRevoke(nope) = %v, want not_found", err)
	}
	ids := func(all bool) []string {
		ts, err := s.TokenList(ctx, vigil.TokenListParams{IncludeRevoked: all})
		if err != nil {
			t.Fatalf("TokenList: %v", err)
		}
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	if diff := gocmp.Diff([]string{"tok-1"}, ids(false)); diff != "" {
		t.Errorf("TokenList (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]string{"tok-1", "tok-2"}, ids(true)); diff != "" {
		t.Errorf("TokenList(all) (-want +got):\n%s", diff)
	}
}

// testTokenConflict: neither an id nor a hash can be taken twice.
func testTokenConflict(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	s, _ := newStore(t)
	if err := s.TokenCreate(ctx, vigil.TokenCreateParams{Token: newToken("tok-1", "vgl_one", "a")}); err != nil {
		t.Fatalf("TokenCreate: %v", err)
	}
	for _, tok := range []*vigil.Token{newToken("tok-1", "vgl_other", "a"), newToken("tok-9", "vgl_one", "a")} {
		if err := s.TokenCreate(ctx, vigil.TokenCreateParams{Token: tok}); !errors.Is(err, vigil.ErrConflict) {
			t.Errorf("TokenCreate(%s) = %v, want conflict", tok.ID, err)
		}
	}
}
