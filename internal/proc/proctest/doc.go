// Package proctest holds test helpers for what vigil's process handling
// leaves behind: a test that a process vigil started is gone.
package proctest
