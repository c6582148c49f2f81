package receipts

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crux-go/crux/store"
)

// Receipts earned by each actor. A passport's reputation tier follows the
// receipts that name it as actor, so what they have earned is kept per
// tenant and actor, in the transaction of each receipt, rather than
// counted from the chain (which may hold millions).
//
// A tier must reflect a history, not a burst: an agent mints receipts for
// itself with every decision or acknowledgement it records, as fast as it
// can call. So of the receipts of one UTC day, at most DailyCredit count
// towards the tier (an actor's credit); no run of calls within a day earns
// more, and a tier that needs N credits needs at least N/DailyCredit days
// of use.

// DailyCredit is the most receipts of one UTC day (by their created_at)
// that count towards their actor's credit.
const DailyCredit = 50

// bucketActors holds the standings: tenant, NUL, actor → the actor's
// receipts, credit, the UTC day (days since 1970-01-01) of its latest
// counted receipt and that day's receipts (8, 8, 4 and 4 bytes,
// big-endian); and the key actorsBuilt once they cover every stored
// receipt. A store written by an older crux may hold 8-byte values (the
// receipts alone) and the key 0xff, which marked them complete;
// BuildActorCounts rewrites it.
const bucketActors = "receipts.actors"

// actorsBuilt marks a store whose standings are complete. It is not valid
// UTF-8, so no tenant's key starts with it.
var actorsBuilt = []byte{0xff, 0x01}

// KindRefusal is the kind of the receipt of a refused call. Refusals, and
// their summaries (KindRefusal + SummaryKindSuffix), earn nothing: they are
// not counted for their actor.
const KindRefusal = "refusal"

// earns reports whether a receipt of kind counts for its actor.
func earns(kind string) bool {
	return kind != KindRefusal && kind != KindRefusal+SummaryKindSuffix
}

func actorKey(tenant, actor string) []byte {
	return append(append([]byte(tenant), 0), actor...)
}

// Standing is what the receipts naming an actor in a tenant have earned.
type Standing struct {
	// Receipts is the number of receipts naming the actor, refusals and
	// their summaries excepted.
	Receipts uint64
	// Credit is the part of Receipts a tier follows: at most DailyCredit
	// of each UTC day.
	Credit uint64

	day      uint32 // UTC day of the latest receipt counted
	dayCount uint32 // receipts counted on that day
}

// add counts one receipt created at t, after those counted before: a
// receipt of another UTC day than the one before it starts that day's
// count.
func (s *Standing) add(t time.Time) {
	s.Receipts++
	day := utcDay(t)
	if day != s.day || s.Receipts == 1 {
		s.day, s.dayCount = day, 0
	}
	if s.dayCount < math.MaxUint32 {
		s.dayCount++
	}
	if s.dayCount <= DailyCredit {
		s.Credit++
	}
}

// utcDay is the number of whole days from 1970-01-01 UTC to t (0 before).
func utcDay(t time.Time) uint32 {
	u := t.Unix()
	if u < 0 {
		return 0
	}
	return uint32(min(u/86400, math.MaxUint32))
}

func (s Standing) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 24), s.Receipts)
	b = binary.BigEndian.AppendUint64(b, s.Credit)
	b = binary.BigEndian.AppendUint32(b, s.day)
	return binary.BigEndian.AppendUint32(b, s.dayCount)
}

// countForActor adds a receipt of kind created at now to its actor's
// standing, within the transaction that appends it. Until the standings
// have been built (see BuildActorCounts) nothing is added, except in a
// store holding no receipt yet, whose standings are complete from the
// start.
func countForActor(tx store.Tx, tenant, kind, actor string, now time.Time) error {
	if _, err := tx.Get(bucketActors, actorsBuilt); errors.Is(err, store.ErrNotFound) {
		empty := true
		if err := tx.Scan(bucketReceipts, nil, false, func(_, _ []byte) error {
			empty = false
			return store.ErrStop
		}); err != nil {
			return err
		}
		if !empty {
			return nil // BuildActorCounts counts this receipt with the others
		}
		if err := tx.Put(bucketActors, actorsBuilt, nil); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if !earns(kind) {
		return nil
	}
	key := actorKey(tenant, actor)
	s, err := readStanding(tx, key)
	if err != nil {
		return err
	}
	s.add(now)
	return tx.Put(bucketActors, key, s.encode())
}

func readStanding(tx store.Tx, key []byte) (Standing, error) {
	v, err := tx.Get(bucketActors, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Standing{}, nil
	case err != nil:
		return Standing{}, err
	case len(v) == 8:
		// Written by an older crux, before BuildActorCounts: receipts
		// alone, whose days are not known; they earn one day's credit.
		n := binary.BigEndian.Uint64(v)
		return Standing{Receipts: n, Credit: min(n, DailyCredit), dayCount: uint32(min(n, math.MaxUint32))}, nil
	case len(v) != 24:
		return Standing{}, &store.CorruptRecordError{Bucket: bucketActors, Key: append([]byte(nil), key...),
			Err: fmt.Errorf("a standing of %d bytes, not 24", len(v))}
	}
	return Standing{
		Receipts: binary.BigEndian.Uint64(v), Credit: binary.BigEndian.Uint64(v[8:]),
		day: binary.BigEndian.Uint32(v[16:]), dayCount: binary.BigEndian.Uint32(v[20:]),
	}, nil
}

// ActorStanding is what the receipts of tenant naming actor have earned
// (see Standing). It reads one record, whatever the number of receipts.
func ActorStanding(tx store.Tx, tenant, actor string) (Standing, error) {
	return readStanding(tx, actorKey(tenant, actor))
}

// ActorReceipts is the number of receipts of tenant that name actor, other
// than refusals and their summaries: ActorStanding's Receipts.
func ActorReceipts(tx store.Tx, tenant, actor string) (uint64, error) {
	s, err := ActorStanding(tx, tenant, actor)
	return s.Receipts, err
}

// BuildActorCounts works out the standing of every actor once, in a store
// written before the standings existed (or when they were counts of
// receipts alone); afterwards it does nothing. It reads every receipt, so
// it runs once, before a server's first call. A tenant's receipts are
// counted in chain order, as Append counts them.
func BuildActorCounts(tx store.Tx) error {
	if _, err := tx.Get(bucketActors, actorsBuilt); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	type earned struct {
		tenant, actor string
		seq           uint64
		at            time.Time
	}
	var all []earned
	if err := tx.Scan(bucketReceipts, nil, false, func(k, v []byte) error {
		r, err := decodeRecord(string(k), v)
		if err != nil {
			return nil // an unreadable receipt earns nothing; crux doctor reports it
		}
		h, err := r.Header()
		if err != nil || !earns(r.Kind) {
			return nil
		}
		all = append(all, earned{r.Tenant, h.Actor, r.Seq, h.CreatedAt})
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b earned) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), cmp.Compare(a.seq, b.seq))
	})
	standings := map[string]*Standing{}
	for _, e := range all {
		k := string(actorKey(e.tenant, e.actor))
		s := standings[k]
		if s == nil {
			s = &Standing{}
			standings[k] = s
		}
		s.add(e.at)
	}
	// What an older crux kept goes: its marker, and the counts of actors
	// whose receipts are unreadable.
	var stale [][]byte
	if err := tx.Scan(bucketActors, nil, false, func(k, _ []byte) error {
		if standings[string(k)] == nil {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range stale {
		if err := tx.Delete(bucketActors, k); err != nil {
			return err
		}
	}
	for k, s := range standings {
		if err := tx.Put(bucketActors, []byte(k), s.encode()); err != nil {
			return err
		}
	}
	return tx.Put(bucketActors, actorsBuilt, nil)
}

// BuildActorCountsBackend runs BuildActorCounts on b once it has read, in
// a read-only transaction, that the counts are not built yet: on a store
// whose counts are complete it writes nothing.
func BuildActorCountsBackend(ctx context.Context, b store.Backend) error {
	built := false
	if err := b.View(ctx, func(tx store.Tx) error {
		_, err := tx.Get(bucketActors, actorsBuilt)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		built = err == nil
		return err
	}); err != nil || built {
		return err
	}
	return b.Update(ctx, BuildActorCounts)
}
