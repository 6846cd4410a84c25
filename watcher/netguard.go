package watcher

import "github.com/vigil-run/vigil/internal/netguard"

// Guard decides which network addresses a probe may connect to (see
// netguard.Guard): kinds that dial use it as their dialer's Control.
type Guard = netguard.Guard

// AddrRefusedError is the error of a connection the Guard refused.
type AddrRefusedError = netguard.AddrRefusedError
