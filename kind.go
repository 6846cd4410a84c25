package vigil

import "time"

// KindSpec holds the defaults of one kind: the ONE table of SPEC §2.
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

// SpecOf returns the defaults for kind k, and false for an unknown kind.
func SpecOf(k Kind) (KindSpec, bool) {
	const m, h = time.Minute, time.Hour
	switch k {
	case KindTimer:
		return KindSpec{Deadline: m, DeadlineFromStart: true, Instant: true}, true
	case KindHTTP:
		return KindSpec{Every: 10 * time.Second, Deadline: 30 * m}, true
	case KindTCP:
		return KindSpec{Every: 5 * time.Second, Deadline: 30 * m}, true
	case KindFile:
		return KindSpec{Every: 5 * time.Second, Deadline: 30 * m}, true
	case KindCommand:
		return KindSpec{Every: 30 * time.Second, Deadline: 30 * m, Exec: true}, true
	case KindRun:
		// A run is started by its first probe, at once, and is woken when
		// it ends (see watcher/run); the interval is only a fallback for a
		// lost wake-up or a supervisor that died without a word.
		return KindSpec{Every: 30 * time.Second, Deadline: h, Exec: true}, true
	case KindCI:
		return KindSpec{Every: 30 * time.Second, Deadline: 2 * h}, true
	case KindTicket:
		return KindSpec{Every: 60 * time.Second, Standing: true}, true
	case KindFolder:
		return KindSpec{Every: 10 * time.Second, Deadline: 30 * m}, true
	case KindToken:
		return KindSpec{Deadline: 24 * h}, true
	case KindSchedule:
		return KindSpec{Standing: true, Exec: true}, true
	}
	return KindSpec{}, false
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
