package vigil

import "time"

// KindSpec holds the defaults of one kind (SPEC §2). Each kind's package
// says its own, in its descriptor (watcher.Descriptor); watcher/kinds
// lists the built-in ones and the daemon's watcher registry answers for
// the kinds it runs.
type KindSpec struct {
	// Every is the default re-check interval; zero for kinds that do not
	// probe on an interval (timer, token).
	Every time.Duration
	// Deadline is the default deadline; zero means none (standing kinds).
	Deadline time.Duration
	// DeadlineFromStart makes the default deadline count from the watch's
	// StartAt (a timer's instant) instead of its creation.
	DeadlineFromStart bool
	// Standing kinds report each change and never settle by themselves.
	Standing bool
	// Instant kinds are answered by the clock alone: no I/O, settled in batches.
	Instant bool
	// Exec kinds run commands and need exec allowed.
	Exec bool
}

// Limits are the bounds and defaults of SPEC §9 and §10 that the engine
// enforces. DefaultLimits returns them; the daemon's config may change them.
type Limits struct {
	MinEvery              time.Duration
	MaxDeadline           time.Duration
	MaxActive             int
	MaxActivePerRecipient int
	MaxChainDepth         int
	RetentionWatches      time.Duration
	RetentionMessages     time.Duration
	IdempotencyTTL        time.Duration
	// ObserveWait bounds how long a registration with observe waits for
	// the first observation.
	ObserveWait time.Duration
	// MaxWait bounds a long-poll (wait on a watch, read a mailbox).
	MaxWait time.Duration
	// BackoffCap caps the unavailable backoff at this many intervals.
	BackoffCap int

	MaxPredicateBytes int
	MaxNoteBytes      int
	MaxLabels         int
	MaxLabelBytes     int
	MaxNameBytes      int // recipient, reader and idempotency key
	MaxPolls          int
}

// DefaultLimits returns the defaults of SPEC §10.
func DefaultLimits() Limits {
	return Limits{
		MinEvery:              time.Second,
		MaxDeadline:           7 * 24 * time.Hour,
		MaxActive:             100_000,
		MaxActivePerRecipient: 1_000,
		MaxChainDepth:         3,
		RetentionWatches:      7 * 24 * time.Hour,
		RetentionMessages:     30 * 24 * time.Hour,
		IdempotencyTTL:        24 * time.Hour,
		ObserveWait:           5 * time.Second,
		MaxWait:               60 * time.Second,
		BackoffCap:            10,
		MaxPredicateBytes:     128 << 10,
		MaxNoteBytes:          4 << 10,
		MaxLabels:             32,
		MaxLabelBytes:         256,
		MaxNameBytes:          128,
		MaxPolls:              1_000_000,
	}
}
