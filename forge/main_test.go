package forge_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// shared read runs on no caller's context, so it must end by itself
// (RequestTimeout at most) once its callers are gone.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
