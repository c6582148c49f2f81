package tools

import (
	"sync"

	"github.com/crux-go/crux/index"
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
	m     map[string]map[uint32]*cachedSegment // by tenant, then seq
	order []segmentKey                         // oldest first, from order[head]
	head  int
	bytes int
}

// cachedSegment is a segment the cache holds, and once query's phrase has
// read it, its words as the phrase reads them.
type cachedSegment struct {
	seg   *store.Segment
	words *index.Sequence // nil until sequence makes it
}

type segmentKey struct {
	tenant string
	seq    uint32
}

// segmentCacheBytes bounds the cache: the segments' text, ids, titles and
// sequences, and an allowance per entry.
const segmentCacheBytes = 8 << 20

func newSegmentCache() *segmentCache {
	return &segmentCache{m: make(map[string]map[uint32]*cachedSegment)}
}

// cost is what c counts against segmentCacheBytes.
func cost(k segmentKey, c *cachedSegment) int {
	n := len(k.tenant) + len(c.seg.DocID) + len(c.seg.Title) + len(c.seg.Text) + 128
	if c.words != nil {
		n += c.words.Bytes()
	}
	return n
}

// segment returns segment seq of tenant, from the cache or from tx. The
// segment returned is shared: callers do not modify it.
func (c *segmentCache) segment(tx store.Tx, tenant string, seq uint32) (*store.Segment, error) {
	e, err := c.entry(tx, tenant, seq)
	if err != nil {
		return nil, err
	}
	return e.seg, nil
}

// sequence returns segment seq of tenant, and its title and text as
// query's phrase reads them (index.Sequence), made once while the cache
// holds the segment.
func (c *segmentCache) sequence(tx store.Tx, tenant string, seq uint32) (*store.Segment, *index.Sequence, error) {
	e, err := c.entry(tx, tenant, seq)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	words := e.words
	c.mu.Unlock()
	if words != nil {
		return e.seg, words, nil
	}
	a := analyzers.Get().(*index.Analyzer)
	words = a.Sequence(e.seg.Title, e.seg.Text)
	analyzers.Put(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := segmentKey{tenant, seq}
	if c.m[tenant][seq] == e && e.words == nil { // still held, and by this entry
		c.bytes += words.Bytes()
		e.words = words
		c.evict(k)
	}
	return e.seg, words, nil
}

// analyzers are the Analyzers sequence makes sequences with: each
// remembers the stems of the segments it analysed, which the next repeat.
var analyzers = sync.Pool{New: func() any { return new(index.Analyzer) }}

// entry returns the cache's entry of segment seq of tenant, reading the
// segment from tx when the cache does not hold it.
func (c *segmentCache) entry(tx store.Tx, tenant string, seq uint32) (*cachedSegment, error) {
	c.mu.Lock()
	e, ok := c.m[tenant][seq]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	s, err := store.GetSegment(tx, tenant, seq)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	segs := c.m[tenant]
	if kept, ok := segs[seq]; ok {
		return kept, nil
	}
	if segs == nil {
		segs = make(map[uint32]*cachedSegment)
		c.m[tenant] = segs
	}
	k := segmentKey{tenant, seq}
	e = &cachedSegment{seg: s}
	c.bytes += cost(k, e)
	c.evict(k)
	if c.m[tenant] == nil { // evict forgot the tenant's last segment
		c.m[tenant] = segs
	}
	c.order = append(c.order, k)
	segs[seq] = e
	return e, nil
}

// evict forgets the oldest segments, other than keep, until the cache
// holds at most segmentCacheBytes. c.mu is held.
func (c *segmentCache) evict(keep segmentKey) {
	for c.bytes > segmentCacheBytes && c.head < len(c.order) {
		old := c.order[c.head]
		if old == keep {
			break
		}
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
}
