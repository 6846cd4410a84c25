package token_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigil-run/vigil/watcher/token"
)

// Registration makes a secret; only its hash is kept.
func Example() {
	w := token.New(token.Config{})
	c, _ := w.Canonicalize(context.Background(), json.RawMessage(`{}`), time.Time{})
	fmt.Println(len(c.Secret), w.CheckSecret(c.Predicate, c.Secret), w.CheckSecret(c.Predicate, "guess"))
	// Output: 22 true false
}
