package tools

import (
	"sync"

	"github.com/crux-go/crux/store"
)

// segmentCache keeps the segments the retrieval tools read last, by
// tenant and seq. A segment never changes once written and its seq is
// never given to another, so an entry is never stale: a removed segment
// is reached by no posting and no document record, in any transaction
// that no longer sees it, and a transaction that still sees it reads the
// same bytes. The cache holds segments of at most segmentCacheBytes in
// all and forgets the oldest first. It is safe for concurrent use.
type segmentCache struct {
	mu    sync.Mutex
	m     map[string]map[uint32]*store.Segment // by tenant, then seq
	order []segmentKey                         // oldest first, from order[head]
	head  int
	bytes int
}

type segmentKey struct {
	tenant string
	seq    uint32
}

// segmentCacheBytes bounds the cache: the segments' text, ids and titles,
// and an allowance per entry.
const segmentCacheBytes = 8 << 20

func newSegmentCache() *segmentCache {
	return &segmentCache{m: make(map[string]map[uint32]*store.Segment)}
}

// cost is what s counts against segmentCacheBytes.
func cost(k segmentKey, s *store.Segment) int {
	return len(k.tenant) + len(s.DocID) + len(s.Title) + len(s.Text) + 128
}

// segment returns segment seq of tenant, from the cache or from tx. The
// segment returned is shared: callers do not modify it.
func (c *segmentCache) segment(tx store.Tx, tenant string, seq uint32) (*store.Segment, error) {
	c.mu.Lock()
	s, ok := c.m[tenant][seq]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := store.GetSegment(tx, tenant, seq)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	segs := c.m[tenant]
	if _, ok := segs[seq]; ok {
		return s, nil
	}
	if segs == nil {
		segs = make(map[uint32]*store.Segment)
		c.m[tenant] = segs
	}
	k := segmentKey{tenant, seq}
	c.bytes += cost(k, s)
	for c.bytes > segmentCacheBytes && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = segmentKey{}
		c.head++
		olds := c.m[old.tenant]
		c.bytes -= cost(old, olds[old.seq])
		delete(olds, old.seq)
		if len(olds) == 0 {
			delete(c.m, old.tenant)
		}
	}
	if c.head > len(c.order)/2 { // drop the forgotten half of the queue
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	c.order = append(c.order, k)
	if c.m[tenant] == nil { // the loop above forgot the tenant's last segment
		c.m[tenant] = segs
	}
	segs[seq] = s
	return s, nil
}
