package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Gap observations record queries the memory could not answer (a keyword
// query_facts that returned nothing), so an operator or agent can see what
// the memory lacks (get_gaps). They live in their own buckets, never in the
// fact index, so no fact query can return them.
//
// One record is kept per distinct query (Key); seeing it again refreshes its
// time and count. A tenant keeps at most MaxGapObservations records: adding
// one more evicts the least recently seen.
const (
	bucketGaps     = "ops.gaps"      // tenant, key → JSON Gap
	bucketGapsTime = "ops.gaps.time" // tenant, ^seen_at (8 bytes), key → empty: newest first
	bucketGapsN    = "ops.gaps.n"    // tenant → number of records
)

// GapEntity is the entity name under which gap observations are reported.
const GapEntity = "__ops::gaps"

// MaxGapObservations bounds the gap observations kept per tenant.
const MaxGapObservations = 1000

// Gap is one recorded gap observation.
type Gap struct {
	Key       string    `json:"key"`        // stable per distinct query, such as gap:<hex>
	Value     string    `json:"value"`      // what was asked, as JSON text
	Count     int       `json:"count"`      // how many times it was seen
	FirstSeen time.Time `json:"first_seen"` // when it was first seen
	StoredAt  time.Time `json:"stored_at"`  // when it was last seen
}

// RecordGap records (or refreshes) the gap observation key of tenant at
// now, evicting the least recently seen records beyond MaxGapObservations.
func RecordGap(tx Tx, tenant, key, value string, now time.Time) (*Gap, error) {
	if key == "" {
		return nil, ErrEmptyKey
	}
	now = now.UTC()
	g := &Gap{Key: key, Value: value, Count: 1, FirstSeen: now, StoredAt: now}
	k := indexKey(tenant, key)
	old, err := tx.Get(bucketGaps, k)
	switch {
	case err == nil:
		var prev Gap
		if err := json.Unmarshal(old, &prev); err != nil {
			return nil, fmt.Errorf("store: gap %s: %w", key, err)
		}
		g.Count, g.FirstSeen = prev.Count+1, prev.FirstSeen
		if err := tx.Delete(bucketGapsTime, gapTimeKey(tenant, prev.StoredAt, key)); err != nil {
			return nil, err
		}
	case errors.Is(err, ErrNotFound):
		n, err := gapCount(tx, tenant)
		if err != nil {
			return nil, err
		}
		for ; n >= MaxGapObservations; n-- {
			if err := evictOldestGap(tx, tenant); err != nil {
				return nil, err
			}
		}
		if err := tx.Put(bucketGapsN, []byte(tenant), binary.BigEndian.AppendUint64(nil, uint64(n+1))); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if err := tx.Put(bucketGaps, k, b); err != nil {
		return nil, err
	}
	return g, tx.Put(bucketGapsTime, gapTimeKey(tenant, g.StoredAt, key), nil)
}

// Gaps calls fn with tenant's gap observations, most recently seen first,
// until fn returns ErrStop or an error.
func Gaps(tx Tx, tenant string, fn func(*Gap) error) error {
	p := append([]byte(tenant), 0)
	err := tx.Scan(bucketGapsTime, p, false, func(k, _ []byte) error {
		key := string(k[len(p)+8:])
		v, err := tx.Get(bucketGaps, indexKey(tenant, key))
		if err != nil {
			return err
		}
		g := new(Gap)
		if err := json.Unmarshal(v, g); err != nil {
			return fmt.Errorf("store: gap %s: %w", key, err)
		}
		return fn(g)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

func gapTimeKey(tenant string, t time.Time, key string) []byte {
	k := append([]byte(tenant), 0)
	k = binary.BigEndian.AppendUint64(k, ^uint64(t.UnixNano()))
	return append(k, key...)
}

func gapCount(tx Tx, tenant string) (int, error) {
	v, err := tx.Get(bucketGapsN, []byte(tenant))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

// evictOldestGap removes tenant's least recently seen gap (the last entry
// of the newest-first time index).
func evictOldestGap(tx Tx, tenant string) error {
	p := append([]byte(tenant), 0)
	var victim []byte
	err := tx.Scan(bucketGapsTime, p, true, func(k, _ []byte) error {
		victim = append([]byte(nil), k...)
		return ErrStop
	})
	if err != nil || victim == nil {
		return err
	}
	if err := tx.Delete(bucketGapsTime, victim); err != nil {
		return err
	}
	return tx.Delete(bucketGaps, indexKey(tenant, string(victim[len(p)+8:])))
}
