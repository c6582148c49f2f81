package toolkit

import (
	"sync"
	"time"

	"github.com/crux-go/crux/surface"
)

// maxIntents bounds the intents an intentBook keeps; past it, expired
// entries are dropped, then the oldest.
const maxIntents = 4096

// intentBook remembers, per caller, the last intent declared with
// cuecrux_session, for [surface.IntentTTL]. The dynamic tool surface reads
// it. It is safe for concurrent use; the zero value is ready.
type intentBook struct {
	mu sync.Mutex
	m  map[string]intentEntry // guarded by mu
}

type intentEntry struct {
	intent surface.Intent
	at     time.Time
}

// intentKey is the caller's identity, or a shared key for anonymous callers.
func intentKey(c Caller) string {
	if id := c.Identity(); id != "" {
		return c.TenantID() + "\x00" + id
	}
	return c.TenantID() + "\x00__anon__"
}

// Record sets c's intent as of now; an empty intent clears it.
func (b *intentBook) Record(c Caller, intent surface.Intent, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := intentKey(c)
	if intent == "" {
		delete(b.m, k)
		return
	}
	if b.m == nil {
		b.m = make(map[string]intentEntry)
	}
	if _, ok := b.m[k]; !ok && len(b.m) >= maxIntents {
		b.evict(now)
	}
	b.m[k] = intentEntry{intent, now}
}

// Intent returns c's intent if it was recorded within the TTL.
func (b *intentBook) Intent(c Caller, now time.Time) (surface.Intent, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[intentKey(c)]
	if !ok || now.Sub(e.at) > surface.IntentTTL {
		return "", false
	}
	return e.intent, true
}

// evict drops expired entries, or the oldest one when none has expired.
func (b *intentBook) evict(now time.Time) {
	oldest, oldestAt := "", now
	for k, e := range b.m {
		if now.Sub(e.at) > surface.IntentTTL {
			delete(b.m, k)
		} else if e.at.Before(oldestAt) {
			oldest, oldestAt = k, e.at
		}
	}
	if len(b.m) >= maxIntents {
		delete(b.m, oldest)
	}
}
