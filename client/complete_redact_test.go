package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// A Complete whose caller gives up says so without the completion token,
// which is its path and the secret of its watch.
func TestCompleteTokenNotInError(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "cmpl_0123456789abcdefSECRET"
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err = c.Complete(ctx, vigil.CompleteRequest{Token: secret})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Complete cancelled: error %q holds the completion token", err)
	}
}
