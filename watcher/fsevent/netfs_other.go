//go:build !linux

package fsevent

// networkFS reports whether dir is on a network file system; this
// platform does not tell, so events are trusted.
func networkFS(string) (string, bool) { return "", false }
