package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/auth"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ci"
	"github.com/vigil-run/vigil/watcher/ticket"
	"github.com/vigil-run/vigil/watcher/timer"
)

// TestTokenReposScope: a token with a repos scope registers ci and
// ticket watches only on the repositories its globs match; another is
// refused forbidden on predicate.repo, naming it, before the forge is
// read (a ref is not resolved with the daemon's token for it), alone or
// item by item in a batch. Kinds that read no forge are not limited, and
// a token without repos watches any repository, as before.
const sha40 = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"

func TestTokenReposScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		w.Write([]byte(sha40))
	}))
	defer srv.Close()
	forges, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: srv.URL, Token: "ghp_daemon"}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer forges.Close()
	c := &clock{t: t0}
	st := memstore.New()
	tokens := auth.New(auth.Config{Store: st, NowFunc: c.Now})
	e := engine.New(engine.Config{
		Store: st, NowFunc: c.Now, CheckFunc: tokens.CheckWatch,
		Watchers: watcher.NewRegistry(timer.New(timer.Config{}), ci.New(ci.Config{Forges: forges}), ticket.New(ticket.Config{Forges: forges})),
	})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	scoped := func(repos ...string) context.Context {
		t.Helper()
		sctx, _ := scopedToken(t, tokens, repos...)
		return sctx
	}
	sctx := scoped("GitHub/Acme/*")
	ciOn := func(repo, ref string) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindCI, Recipient: "r", Predicate: obj(`{"repo":"` + repo + `","sha":"` + ref + `"}`)}
	}
	ticketOn := func(repo string) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTicket, Recipient: "r", Predicate: obj(`{"repo":"` + repo + `","number":7}`)}
	}
	refusedFor := func(err error, repo string) bool {
		var ve *vigil.Error
		return vigil.ErrorCode(err) == vigil.CodeForbidden && errors.As(err, &ve) && ve.Field == "predicate.repo" && strings.Contains(ve.Message, repo)
	}

	if _, err := e.Register(sctx, ciOn("acme/api", sha40)); err != nil {
		t.Fatalf("ci on a repository the scope matches: %v", err)
	}
	if _, err := e.Register(sctx, ticketOn("ACME/web")); err != nil {
		t.Fatalf("ticket on a repository the scope matches (case does not matter): %v", err)
	}
	if _, err := e.Register(sctx, ciOn("other/api", sha40)); !refusedFor(err, "github/other/api") {
		t.Fatalf("ci on another tenant's repository: %v, want forbidden on predicate.repo naming github/other/api", err)
	}
	if _, err := e.Register(sctx, ticketOn("other/secret")); !refusedFor(err, "github/other/secret") {
		t.Fatalf("ticket on another tenant's repository: %v, want forbidden naming github/other/secret", err)
	}
	before := reads.Load()
	if _, err := e.Register(sctx, ciOn("other/api", "main")); !refusedFor(err, "github/other/api") {
		t.Fatalf("ci on a ref of another tenant's repository: %v, want forbidden", err)
	}
	if n := reads.Load() - before; n != 0 {
		t.Fatalf("the forge was read %d times for a refused repository (its ref resolved with the daemon's token)", n)
	}
	if _, err := e.Register(sctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: obj(`{"in":"1m"}`)}); err != nil {
		t.Fatalf("a timer under a repos scope: %v", err)
	}

	res, err := e.RegisterBatch(sctx, []vigil.RegisterRequest{ciOn("acme/api", strings.Repeat("b", 40)), ticketOn("other/secret"), ticketOn("acme/api")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != vigil.BatchCreated || res[2].Status != vigil.BatchCreated {
		t.Fatalf("batch items on matched repositories: %+v, %+v", res[0], res[2])
	}
	if res[1].Status != vigil.BatchRefused || !refusedFor(res[1].Err, "github/other/secret") {
		t.Fatalf("batch item on another tenant's repository: %+v, want refused forbidden naming it", res[1])
	}

	if _, err := e.Register(scoped(), ticketOn("other/secret")); err != nil {
		t.Fatalf("a token without repos: %v, want any repository", err)
	}
	if _, err := e.Register(ctx, ticketOn("other/elsewhere")); err != nil {
		t.Fatalf("the admin: %v", err)
	}
}
