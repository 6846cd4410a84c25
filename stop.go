package vigil

// StopError, returned by a check made before a watch's probe (a token's
// revocation, see the engine's CheckFunc), cancels the watch silently with
// the reason it names, and no probe runs.
type StopError struct {
	// Reason is the outcome's machine word ("revoked").
	Reason string
	// Sentence is the outcome's sentence.
	Sentence string
}

func (e *StopError) Error() string { return e.Sentence }
