package auth_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/store/memstore"
)

// TestReposScopeValidated: a token's repos are globs over PROVIDER/REPO,
// kept lowercased, sorted and without repeats, carried into the scope of
// a request bearing the token; a pattern that names no provider, is not
// a glob, is too long, or too many of them, is refused invalid_request on
// its field, and no token is made.
func TestReposScopeValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	s := auth.New(auth.Config{Store: st})
	tok, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}, Repos: []string{"GitLab/Group/**", "github/acme/*", "github/acme/*", "*/acme/{api,web}"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"*/acme/{api,web}", "github/acme/*", "gitlab/group/**"}
	if !slices.Equal(tok.Repos, want) {
		t.Fatalf("repos = %q, want %q", tok.Repos, want)
	}
	scope, ok, err := s.Authenticate(ctx, tok.Secret)
	if err != nil || !ok || !slices.Equal(scope.Repos, want) {
		t.Fatalf("scope repos = %q (%v, %v), want %q", scope.Repos, ok, err, want)
	}
	for _, c := range []struct{ path string }{{"github/acme/api"}, {"gitlab/group/sub/name"}, {"gitea/acme/web"}} {
		if !forge.MatchRepo(scope.Repos, c.path) {
			t.Errorf("%s not matched by %q", c.path, scope.Repos)
		}
	}
	for _, path := range []string{"github/other/api", "gitlab/other/group/x", "gitea/acme/docs", "github/acme"} {
		if forge.MatchRepo(scope.Repos, path) {
			t.Errorf("%s matched by %q", path, scope.Repos)
		}
	}

	many := make([]string, forge.MaxRepoPatterns+1)
	for i := range many {
		many[i] = "github/acme/*"
	}
	for _, c := range []struct {
		repos []string
		field string
	}{
		{[]string{"github.com/acme/*"}, "repos[0]"},
		{[]string{"github/acme/*", "acme/api"}, "repos[1]"},
		{[]string{""}, "repos[0]"},
		{[]string{"github"}, "repos[0]"},
		{[]string{"github/acme/[api"}, "repos[0]"},
		{[]string{"github//api"}, "repos[0]"},
		{[]string{"github/acme/*/"}, "repos[0]"},
		{[]string{"github/acme /api"}, "repos[0]"},
		{[]string{"github/" + strings.Repeat("a", forge.MaxRepoPattern)}, "repos[0]"},
		{many, "repos"},
	} {
		_, err := s.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{"a"}, Repos: c.repos})
		var ve *vigil.Error
		if !errors.As(err, &ve) || ve.Code != vigil.CodeInvalidRequest || ve.Field != c.field {
			t.Errorf("repos %.60q: %v, want invalid_request on %s", c.repos, err, c.field)
		}
	}
	ts, _ := s.Tokens(ctx, true)
	if len(ts) != 1 {
		t.Errorf("%d tokens made, want the one valid", len(ts))
	}
}
