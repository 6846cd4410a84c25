package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/vigil-run/vigil/httpapi"
)

// FuzzMessagesCursor: the mailbox cursor (after) and the other read
// parameters are parsed without panicking and answered 200 or a 422
// refusal, never an internal error; a cursor accepted is a non-negative
// whole number.
func FuzzMessagesCursor(f *testing.F) {
	for _, s := range [][3]string{{"0", "", ""}, {"42", "r", "true"}, {"-1", "", ""}, {"9223372036854775808", "r", "false"}, {"1e3", "", "yes"}, {"", "", ""}, {" 7", "r\x00", "1"}} {
		f.Add(s[0], s[1], s[2])
	}
	api := httpapi.New(httpapi.Options{Service: newFake(), AdminToken: adminToken})
	h := api.Handler()
	f.Cleanup(api.Close)
	f.Fuzz(func(t *testing.T, after, reader, ack string) {
		q := url.Values{"after": {after}, "reader": {reader}, "ack": {ack}}
		req := httptest.NewRequest("GET", "http://localhost/v1/recipients/r/messages?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			if n, err := strconv.ParseInt(after, 10, 64); err != nil || n < 0 {
				t.Fatalf("after=%q was accepted", after)
			}
		case http.StatusUnprocessableEntity:
		default:
			t.Fatalf("after=%q reader=%q ack=%q: status %d %s", after, reader, ack, rec.Code, rec.Body)
		}
	})
}
