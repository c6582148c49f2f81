package receipts

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/crux-go/crux/store"
)

// Receipts earned by each actor. A passport's reputation tier follows the
// number of receipts that name it as actor, so the count is kept per
// tenant and actor, in the transaction of each receipt, rather than
// counted from the chain (which may hold millions).

// bucketActors holds the counts: tenant, NUL, actor → count (8 bytes
// big-endian); and the key actorsBuilt once the counts cover every stored
// receipt.
const bucketActors = "receipts.actors"

// actorsBuilt marks a store whose counts are complete. It is not valid
// UTF-8, so no tenant's key starts with it.
var actorsBuilt = []byte{0xff}

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

// countForActor adds a receipt of kind to its actor's count, within the
// transaction that appends it. Until the counts have been built (see
// BuildActorCounts) nothing is added, except in a store holding no receipt
// yet, whose counts are complete from the start.
func countForActor(tx store.Tx, tenant, kind, actor string) error {
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
	return addCount(tx, actorKey(tenant, actor), 1)
}

func addCount(tx store.Tx, key []byte, n uint64) error {
	cur, err := readCount(tx, key)
	if err != nil {
		return err
	}
	return tx.Put(bucketActors, key, binary.BigEndian.AppendUint64(nil, cur+n))
}

func readCount(tx store.Tx, key []byte) (uint64, error) {
	v, err := tx.Get(bucketActors, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, &store.CorruptRecordError{Bucket: bucketActors, Key: append([]byte(nil), key...),
			Err: fmt.Errorf("a count of %d bytes, not 8", len(v))}
	}
	return binary.BigEndian.Uint64(v), nil
}

// ActorReceipts is the number of receipts of tenant that name actor, other
// than refusals and their summaries. It reads one counter, whatever the
// number of receipts.
func ActorReceipts(tx store.Tx, tenant, actor string) (uint64, error) {
	return readCount(tx, actorKey(tenant, actor))
}

// BuildActorCounts counts the receipts of every actor once, in a store
// written before the counts existed; afterwards it does nothing. It reads
// every receipt, so it runs once, when a server opens the store.
func BuildActorCounts(tx store.Tx) error {
	if _, err := tx.Get(bucketActors, actorsBuilt); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	counts := map[string]uint64{}
	if err := tx.Scan(bucketReceipts, nil, false, func(k, v []byte) error {
		r, err := decodeRecord(string(k), v)
		if err != nil {
			return nil // an unreadable receipt earns nothing; crux doctor reports it
		}
		h, err := r.Header()
		if err != nil || !earns(r.Kind) {
			return nil
		}
		counts[string(actorKey(r.Tenant, h.Actor))]++
		return nil
	}); err != nil {
		return err
	}
	for k, n := range counts {
		if err := tx.Put(bucketActors, []byte(k), binary.BigEndian.AppendUint64(nil, n)); err != nil {
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
