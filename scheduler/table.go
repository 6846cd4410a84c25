package scheduler

import "hash/maphash"

// idTable finds a watch's slot by its id without a pointer the garbage
// collector would follow: an open-addressing hash table (linear probing,
// deletion by backward shift, no tombstones) of slot numbers, each with
// its id's hash; the ids themselves are in the scheduler's arena. A Go
// map[string]int32 holds a string header, a pointer, per watch, which
// every collection visits (BenchmarkGCMark).
type idTable struct {
	seed    maphash.Seed
	buckets []bucket // a power of two long, or empty
	n       int
}

// bucket is one place in the table: slot+1 (0: empty) and the low 32 bits
// of the id's hash, compared before the id and used to place it again
// when the table grows.
type bucket struct {
	hash uint32
	slot int32
}

func (t *idTable) hash(id []byte) uint32 { return uint32(maphash.Bytes(t.seed, id)) }

func (t *idTable) hashString(id string) uint32 { return uint32(maphash.String(t.seed, id)) }

// insert adds slot k with hash h; the caller knows its id is not there.
func (t *idTable) insert(k int32, h uint32) {
	if (t.n+1)*4 > len(t.buckets)*3 {
		t.grow(max(16, 2*len(t.buckets)))
	}
	t.place(bucket{hash: h, slot: k + 1})
	t.n++
}

func (t *idTable) place(b bucket) {
	mask := uint32(len(t.buckets) - 1)
	i := b.hash & mask
	for t.buckets[i].slot != 0 {
		i = (i + 1) & mask
	}
	t.buckets[i] = b
}

// reserve makes room for n more ids without growing on the way.
func (t *idTable) reserve(n int) {
	want := 16
	for want*3 < (t.n+n)*4 {
		want *= 2
	}
	if want > len(t.buckets) {
		t.grow(want)
	}
}

func (t *idTable) grow(size int) {
	old := t.buckets
	t.buckets = make([]bucket, size)
	for _, b := range old {
		if b.slot != 0 {
			t.place(b)
		}
	}
}

// remove takes slot k, with hash h, out of the table, shifting the
// buckets after it back so that no search stops short.
func (t *idTable) remove(k int32, h uint32) {
	mask := uint32(len(t.buckets) - 1)
	i := h & mask
	for t.buckets[i].slot != k+1 {
		if t.buckets[i].slot == 0 {
			return
		}
		i = (i + 1) & mask
	}
	t.n--
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		b := t.buckets[j]
		if b.slot == 0 {
			break
		}
		// b may move back to i if its home is not cyclically in (i, j].
		home := b.hash & mask
		if (j-home)&mask >= (j-i)&mask {
			t.buckets[i] = b
			i = j
		}
	}
	t.buckets[i] = bucket{}
}
