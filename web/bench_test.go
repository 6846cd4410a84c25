package web_test

import (
	"io"
	"testing"

	"github.com/vigil-run/vigil/store/memstore"
)

// BenchmarkPanelListPage serves the list's first page (50 rows, with the
// counts) over HTTP: what the panel adds to the store's read (see
// store/sqlite BenchmarkWatchListFilters for that, at 100 000 watches).
// The store here is the in-memory one with 1 000 watches.
func BenchmarkPanelListPage(b *testing.B) {
	st := memstore.New()
	fill(b, st, 1000)
	srv, hc := panelOn(b, st)
	for b.Loop() {
		resp, err := hc.Get(srv.URL + "/?kind=file")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
