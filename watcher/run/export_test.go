package run

// SetBeforeStart makes a second stage call f once its record is on disk,
// just before it starts the program (tests: a signal that comes then).
func SetBeforeStart(f func()) { beforeStart = f }
