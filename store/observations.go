package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Gap observations record queries the memory could not answer (a keyword
// query_facts that returned nothing), so an agent can see what the memory
// lacks (get_gaps). They live in their own buckets, never in the fact
// index, so no fact query can return them.
//
// A gap belongs to the agent that asked ("" for anonymous callers, who
// share one log), and only that agent reads it ([Gaps]); [TenantGaps]
// reads every agent's, for summaries that must not show them. One record
// is kept per agent and distinct query (Key); seeing it again refreshes its
// time and count. An agent keeps at most MaxGapsPerAgent records and a
// tenant MaxGapObservations: adding one more evicts the agent's, or the
// tenant's, least recently seen. So no agent, anonymous callers included,
// can push another's records out on its own.
const (
	bucketGaps      = "ops.gaps.v2"       // tenant, agent, key → JSON Gap
	bucketGapsTime  = "ops.gaps.v2.time"  // tenant, ^seen_at (8 bytes), agent, key → primary key: the tenant's, newest first
	bucketGapsAgent = "ops.gaps.v2.agent" // tenant, agent, ^seen_at (8 bytes), key → primary key: one agent's, newest first
	bucketGapsN     = "ops.gaps.v2.n"     // tenant → the tenant's records; tenant, agent → the agent's
)

// The layout before gaps belonged to agents: one tenant-wide log. Its
// records are dropped the first time the tenant records a gap.
const (
	legacyBucketGaps     = "ops.gaps"      // tenant, key → JSON
	legacyBucketGapsTime = "ops.gaps.time" // tenant, ^seen_at (8 bytes), key → empty
	legacyBucketGapsN    = "ops.gaps.n"    // tenant → number of records
)

// GapEntity is the entity name under which gap observations are reported.
const GapEntity = "__ops::gaps"

// Bounds of the gap observations.
const (
	// MaxGapObservations bounds the gap observations kept per tenant.
	MaxGapObservations = 1000
	// MaxGapsPerAgent bounds the gap observations kept per agent of a
	// tenant (anonymous callers count as one agent).
	MaxGapsPerAgent = 200
)

// Gap is one recorded gap observation.
type Gap struct {
	Agent     string    `json:"agent,omitempty"` // who asked; "" for anonymous callers
	Key       string    `json:"key"`             // stable per distinct query, such as gap:<hex>
	Value     string    `json:"value"`           // what was asked, as JSON text
	Count     int       `json:"count"`           // how many times it was seen
	FirstSeen time.Time `json:"first_seen"`      // when it was first seen
	StoredAt  time.Time `json:"stored_at"`       // when it was last seen
}

// RecordGap records (or refreshes) the gap observation key of s's agent
// at now, evicting the least recently seen records beyond MaxGapsPerAgent
// for the agent and MaxGapObservations for the tenant.
func RecordGap(tx Tx, s Scope, key, value string, now time.Time) (*Gap, error) {
	if key == "" {
		return nil, ErrEmptyKey
	}
	if err := dropLegacyGaps(tx, s.Tenant); err != nil {
		return nil, err
	}
	now = now.UTC()
	g := &Gap{Agent: s.Agent, Key: key, Value: value, Count: 1, FirstSeen: now, StoredAt: now}
	pk := indexKey(s.Tenant, s.Agent, key)
	old, err := tx.Get(bucketGaps, pk)
	switch {
	case err == nil:
		var prev Gap
		if err := json.Unmarshal(old, &prev); err != nil {
			return nil, fmt.Errorf("store: gap %s: %w", key, err)
		}
		g.Count, g.FirstSeen = prev.Count+1, prev.FirstSeen
		if err := unindexGap(tx, s.Tenant, &prev); err != nil {
			return nil, err
		}
	case errors.Is(err, ErrNotFound):
		for _, bound := range []struct {
			counter []byte
			max     int
			index   string
			prefix  []byte
		}{
			{gapCounter(s.Tenant, s.Agent), MaxGapsPerAgent, bucketGapsAgent, indexKey(s.Tenant, s.Agent, "")},
			{gapCounter(s.Tenant), MaxGapObservations, bucketGapsTime, indexKey(s.Tenant, "")},
		} {
			n, err := gapCount(tx, bound.counter)
			if err != nil {
				return nil, err
			}
			for ; n >= bound.max; n-- {
				if err := evictOldestGap(tx, s.Tenant, bound.index, bound.prefix); err != nil {
					return nil, err
				}
			}
		}
		if err := addGapCounts(tx, s.Tenant, s.Agent, 1); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if err := tx.Put(bucketGaps, pk, b); err != nil {
		return nil, err
	}
	if err := tx.Put(bucketGapsTime, gapTimeKey(s.Tenant, g), pk); err != nil {
		return nil, err
	}
	return g, tx.Put(bucketGapsAgent, gapAgentKey(s.Tenant, g), pk)
}

// Gaps calls fn with the gap observations of s's agent (for an anonymous
// scope, those of anonymous callers), most recently seen first, until fn
// returns ErrStop or an error.
func Gaps(tx Tx, s Scope, fn func(*Gap) error) error {
	return scanGaps(tx, bucketGapsAgent, indexKey(s.Tenant, s.Agent, ""), fn)
}

// GapCount is the number of gap observations of s's agent.
func GapCount(tx Tx, s Scope) (int, error) { return gapCount(tx, gapCounter(s.Tenant, s.Agent)) }

// TenantGaps calls fn with the gap observations of every agent of tenant,
// most recently seen first, until fn returns ErrStop or an error. They name
// who asked: callers summarise them and never show one agent's to another.
func TenantGaps(tx Tx, tenant string, fn func(*Gap) error) error {
	return scanGaps(tx, bucketGapsTime, indexKey(tenant, ""), fn)
}

func scanGaps(tx Tx, index string, prefix []byte, fn func(*Gap) error) error {
	err := tx.Scan(index, prefix, false, func(_, pk []byte) error {
		g, err := getGap(tx, pk)
		if err != nil {
			return err
		}
		return fn(g)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

func getGap(tx Tx, pk []byte) (*Gap, error) {
	v, err := tx.Get(bucketGaps, pk)
	if err != nil {
		return nil, err
	}
	g := new(Gap)
	if err := json.Unmarshal(v, g); err != nil {
		return nil, fmt.Errorf("store: gap %q: %w", pk, err)
	}
	return g, nil
}

// gapTimeKey is g's key in the tenant's time index.
func gapTimeKey(tenant string, g *Gap) []byte {
	k := append([]byte(tenant), 0)
	k = binary.BigEndian.AppendUint64(k, ^uint64(g.StoredAt.UnixNano()))
	return append(k, indexKey(g.Agent, g.Key)...)
}

// gapAgentKey is g's key in its agent's time index.
func gapAgentKey(tenant string, g *Gap) []byte {
	k := append(indexKey(tenant, g.Agent, ""), binary.BigEndian.AppendUint64(nil, ^uint64(g.StoredAt.UnixNano()))...)
	return append(k, g.Key...)
}

func unindexGap(tx Tx, tenant string, g *Gap) error {
	if err := tx.Delete(bucketGapsTime, gapTimeKey(tenant, g)); err != nil {
		return err
	}
	return tx.Delete(bucketGapsAgent, gapAgentKey(tenant, g))
}

// gapCounter is the key of the tenant's record count, or with an agent of
// that agent's (tenant names hold no NUL, so the two never meet).
func gapCounter(tenant string, agent ...string) []byte {
	if len(agent) == 0 {
		return []byte(tenant)
	}
	return indexKey(tenant, agent[0])
}

func gapCount(tx Tx, counter []byte) (int, error) {
	v, err := tx.Get(bucketGapsN, counter)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

// addGapCounts adds delta to the record counts of tenant and of agent.
func addGapCounts(tx Tx, tenant, agent string, delta int) error {
	for _, counter := range [][]byte{gapCounter(tenant), gapCounter(tenant, agent)} {
		n, err := gapCount(tx, counter)
		if err != nil {
			return err
		}
		if n += delta; n <= 0 {
			err = tx.Delete(bucketGapsN, counter)
		} else {
			err = tx.Put(bucketGapsN, counter, binary.BigEndian.AppendUint64(nil, uint64(n)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// evictOldestGap removes the least recently seen gap of the time index
// (the last entry under prefix of index, which lists newest first).
func evictOldestGap(tx Tx, tenant, index string, prefix []byte) error {
	var pk []byte
	err := tx.Scan(index, prefix, true, func(_, v []byte) error {
		pk = append([]byte(nil), v...)
		return ErrStop
	})
	if err != nil || pk == nil {
		return err
	}
	g, err := getGap(tx, pk)
	if err != nil {
		return err
	}
	if err := unindexGap(tx, tenant, g); err != nil {
		return err
	}
	if err := tx.Delete(bucketGaps, pk); err != nil {
		return err
	}
	return addGapCounts(tx, tenant, g.Agent, -1)
}

// dropLegacyGaps removes tenant's records of the tenant-wide layout, whose
// query text was neither cut nor kept per agent. Their count is the
// marker: once it is gone there is nothing left to drop.
func dropLegacyGaps(tx Tx, tenant string) error {
	if _, err := tx.Get(legacyBucketGapsN, []byte(tenant)); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	p := append([]byte(tenant), 0)
	var keys [][]byte
	err := tx.Scan(legacyBucketGapsTime, p, false, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(legacyBucketGaps, indexKey(tenant, string(k[len(p)+8:]))); err != nil {
			return err
		}
		if err := tx.Delete(legacyBucketGapsTime, k); err != nil {
			return err
		}
	}
	return tx.Delete(legacyBucketGapsN, []byte(tenant))
}
