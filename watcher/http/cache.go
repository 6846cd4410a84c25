package httpwatch

import (
	"bytes"

	lru "github.com/hashicorp/golang-lru/v2"
)

// specCacheSize bounds the parsed predicates kept: one per pending http
// watch up to it, the least recently probed going first past it.
const specCacheSize = 16_384

// specCache keeps each watch's parsed predicate, so that a probe parses
// it once, not every interval. An entry is keyed by the watch id and
// holds the predicate it was parsed from: a probe with other bytes
// (never, today: a stored predicate does not change) parses again.
// Entries go when their watch settles or is stopped, or past the bound.
type specCache struct {
	c *lru.Cache[string, cachedSpec]
}

type cachedSpec struct {
	raw  []byte
	spec *spec
}

func newSpecCache(size int) *specCache {
	c, err := lru.New[string, cachedSpec](size)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &specCache{c: c}
}

// get returns the parsed predicate of watch id, parsing raw unless the
// cache holds it for these very bytes. A spec is never changed once
// parsed, so probes may share it.
func (c *specCache) get(id string, raw []byte) (*spec, error) {
	if e, ok := c.c.Get(id); ok && bytes.Equal(e.raw, raw) {
		return e.spec, nil
	}
	s, err := parse(raw)
	if err != nil {
		return nil, err
	}
	if id != "" {
		c.c.Add(id, cachedSpec{raw: bytes.Clone(raw), spec: s})
	}
	return s, nil
}

// forget drops watch id's entry.
func (c *specCache) forget(id string) { c.c.Remove(id) }

// len is how many entries there are.
func (c *specCache) len() int { return c.c.Len() }
