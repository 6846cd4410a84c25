// Package fifo is a map that keeps a bounded number of entries and forgets
// the one added first when it is full: what a daemon remembers of the
// recent past (the events its stream has sent, the watches it heard
// cancelled, the probes of the last watches probed) in a fixed amount of
// memory. Adding allocates nothing once the map is full, and nothing is
// moved when an entry is read: hashicorp/golang-lru's LRU, which the http
// watcher's cache uses, allocates an entry for each key added and
// reorders on reads.
package fifo

// Map maps keys to values, holding at most its capacity: adding a key to
// a full Map forgets the key added longest ago. It is not safe for
// concurrent use.
type Map[K comparable, V any] struct {
	m    map[K]V
	ring []K // the keys in the order added, from next once full
	next int
}

// New returns an empty Map that holds at most capacity (> 0) keys.
func New[K comparable, V any](capacity int) *Map[K, V] {
	if capacity <= 0 {
		panic("fifo: capacity must be positive")
	}
	return &Map[K, V]{m: make(map[K]V, capacity), ring: make([]K, 0, capacity)}
}

// Get returns k's value and whether k is held. It changes nothing.
func (f *Map[K, V]) Get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}

// Add adds k with v, unless k is held already (its value then stays, and
// Add reports added false). When the Map was full, it forgets the key
// added longest ago and returns it with its value (forgot true), for
// the caller to reuse.
func (f *Map[K, V]) Add(k K, v V) (added bool, oldK K, oldV V, forgot bool) {
	if _, ok := f.m[k]; ok {
		return false, oldK, oldV, false
	}
	if len(f.ring) < cap(f.ring) {
		f.ring = append(f.ring, k)
	} else {
		oldK = f.ring[f.next]
		oldV, forgot = f.m[oldK], true
		delete(f.m, oldK)
		f.ring[f.next] = k
		f.next = (f.next + 1) % len(f.ring)
	}
	f.m[k] = v
	return true, oldK, oldV, forgot
}

// Len returns how many keys are held.
func (f *Map[K, V]) Len() int { return len(f.m) }
