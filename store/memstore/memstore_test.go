package memstore_test

import (
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (vigil.Store, func() vigil.Store) {
		s := memstore.New()
		// Memory survives a "reopen" only as the same value: that is all a
		// process-local store can promise.
		return s, func() vigil.Store { return s }
	})
}
