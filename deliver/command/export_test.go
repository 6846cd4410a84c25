package command

// SetWaiting has f called when a resume waits for another run of its
// session.
func SetWaiting(r *Resume, f func()) { r.waiting = f }
