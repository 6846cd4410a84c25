package forge_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
)

// TestFullLastPageRevalidated: GitHub's ETag is of a page's body alone
// and its 304 carries no Link header, so a last page that was full
// (100 comments, 100 reviews) stays 304 when a next page appears after
// it. Taking the cached "no next page" for the end of the listing counted
// 100 comments for ever, whatever was written after the 100th.
func TestFullLastPageRevalidated(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	people := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "ada"
		}
		return out
	}
	reviews := func(n int) []forgetest.Review {
		out := make([]forgetest.Review, n)
		for i := range out {
			out[i] = forgetest.Review{User: "ada", State: "COMMENTED", Comments: 1}
		}
		return out
	}
	srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "Fix", State: "open", Pull: true, Comments: people(100), Reviews: reviews(100)})
	c := client(t, srv, "")
	q := forge.TicketQuery{Repo: "acme/api", Number: 7}
	got, err := c.Ticket(context.Background(), q, t0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got.Comments != 100 || got.Reviews != 100 || got.ReviewComments != 100 {
		t.Fatalf("%d comments, %d reviews, %d review comments, want 100 of each", got.Comments, got.Reviews, got.ReviewComments)
	}
	srv.EditTicket("acme/api", 7, false, func(tk *forgetest.Ticket) {
		tk.Comments = people(101)
		tk.Reviews = reviews(102)
	})
	for i := range 2 { // the page after, read fresh, then revalidated
		now := t0.Add(fresh * time.Duration(1+i))
		got, err = c.Ticket(context.Background(), q, now, fresh)
		if err != nil {
			t.Fatal(err)
		}
		if got.Comments != 101 || got.Reviews != 102 || got.ReviewComments != 102 {
			t.Fatalf("read %d after the 101st comment and the 101st and 102nd reviews: %d comments, %d reviews, %d review comments, want 101, 102, 102",
				i+1, got.Comments, got.Reviews, got.ReviewComments)
		}
	}
}
