package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/httpapi"
)

// demo stands in for the daemon's engine: it knows one watch.
type demo struct{ vigil.Service }

func (demo) Register(ctx context.Context, r vigil.RegisterRequest) (*vigil.Watch, error) {
	return &vigil.Watch{ID: "01JDZK4V7Q", Kind: r.Kind, Recipient: r.Recipient, State: vigil.StatePending, Every: 30 * time.Second}, nil
}

func (demo) Watch(ctx context.Context, id string) (*vigil.Watch, error) {
	return nil, vigil.Errorf(vigil.CodeNotFound, "no watch %q", id)
}

// Register a watch, then ask for one that does not exist: the daemon's
// error comes back as a *vigil.Error that errors.Is recognises.
func Example() {
	api := httpapi.New(httpapi.Options{Service: demo{}, AdminToken: "s3cret"})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	// A real program passes the daemon's address, such as "127.0.0.1:7474".
	c, err := client.New(srv.URL, "s3cret", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()

	w, err := c.Register(ctx, vigil.RegisterRequest{
		Kind:      vigil.KindCI,
		Recipient: "agent-7",
		Predicate: []byte(`{"provider":"github","repo":"acme/api","sha":"main"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.ID, w.State, w.Every)

	_, err = c.Watch(ctx, "nope")
	fmt.Println(errors.Is(err, vigil.ErrNotFound), err)
	// Output:
	// 01JDZK4V7Q pending 30s
	// true no watch "nope"
}
