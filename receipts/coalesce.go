package receipts

import (
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
)

// bucketCoalesce holds the open windows of [AppendCoalesced]: tenant, NUL,
// BLAKE3 of (kind, actor, payload) → CBOR windowRecord.
const bucketCoalesce = "receipts.coalesce"

// coalesceSweep is how many ended windows of other keys an append that
// mints a receipt retires, at most: it bounds the work of one call.
const coalesceSweep = 8

// SummaryKindSuffix ends the kind of the receipt that signs a window's
// count: the summary of a window of "refusal" receipts has the kind
// "refusal_summary".
const SummaryKindSuffix = "_summary"

// Coalesced is how [AppendCoalesced] recorded one append: the receipt that
// stands for it and the window it fell in.
type Coalesced struct {
	// Receipt is the window's receipt: minted by this append when Count
	// is 1, else by the first append of the window.
	Receipt *Receipt
	// Count is the number of identical appends in the window so far, this
	// one included. It is kept unsigned in the store until the window is
	// retired, when a summary receipt signs it.
	Count uint64
	// WindowStart is when the window opened: the created_at of Receipt.
	// WindowEnd is when it closes: WindowStart plus the window's length.
	WindowStart, WindowEnd time.Time
}

// Summary is the payload of a summary receipt (kind: the summarised
// kind and [SummaryKindSuffix]): it signs how many identical appends one
// window of [AppendCoalesced] stood for. Its actor is theirs.
type Summary struct {
	// ReceiptID is the window's receipt, the one every append of the
	// window was answered with.
	ReceiptID string `cbor:"receipt_id"`
	// Kind is the kind of that receipt.
	Kind string `cbor:"kind"`
	// Count is the number of identical appends in the window, the first
	// one included; always at least 2 (a window of one has no summary).
	Count uint64 `cbor:"count"`
	// WindowStart (the receipt's created_at) and WindowEnd bound the
	// window; LastAt is when its last append came. RFC 3339, UTC, nine
	// fractional digits.
	WindowStart string `cbor:"window_start"`
	WindowEnd   string `cbor:"window_end"`
	LastAt      string `cbor:"last_at"`
}

// windowRecord is an open window as stored in bucketCoalesce. It is not
// signed; a summary receipt signs its count when the window is retired.
type windowRecord struct {
	ReceiptID string `cbor:"receipt_id"`
	Kind      string `cbor:"kind"`
	Actor     string `cbor:"actor"`
	Count     uint64 `cbor:"count"`
	Start     string `cbor:"start"`
	End       string `cbor:"end"`
	Last      string `cbor:"last"`
}

func (w *windowRecord) times() (start, end time.Time, err error) {
	if start, err = time.Parse(time.RFC3339Nano, w.Start); err != nil {
		return start, end, err
	}
	end, err = time.Parse(time.RFC3339Nano, w.End)
	return start, end, err
}

// coalesceKey is tenant, NUL, and the BLAKE3 of the CBOR array (kind,
// actor, encoded payload): equal exactly when the three are equal.
func coalesceKey(tenant, kind, actor string, payload []byte) ([]byte, error) {
	id, err := payloadEnc.Marshal([]any{kind, actor, cbor.RawMessage(payload)})
	if err != nil {
		return nil, err
	}
	sum := blake3.Sum256(id)
	return append(headKey(tenant), sum[:]...), nil
}

// AppendCoalesced appends like [Append], except that identical appends
// (same tenant, kind, actor and encoded payload) within window of the
// first one share its receipt instead of each minting one.
//
// The first append of a window mints the receipt as Append does and opens
// the window: [now, now+window). A later identical append whose now falls
// in the window mints nothing: it counts itself in the window's unsigned
// record and returns the window's receipt with the count so far. An
// identical append outside the window (after it, or before it should the
// clock go back) retires the window and opens a new one with a new
// receipt. Retiring a window whose count is 2 or more mints a summary
// receipt (kind+[SummaryKindSuffix], payload [Summary], the same actor)
// that signs its count; a window of one needs none, its receipt says it
// all. Summaries are chained like any receipt, before the receipt that
// opens the next window. Each append that mints a receipt also retires up
// to 8 ended windows of other keys of the tenant, so windows whose appends
// stopped are summarised as the tenant's appends go on; until then their
// counts are in the store, unsigned.
//
// Stored receipts are thus bounded by time, not by calls: per tenant,
// kind, actor and payload, at most one receipt per window, plus one
// summary for a window that stood for more than one append. Nothing
// signed is rewritten and nothing chained is deleted; the window records
// are deleted when retired.
//
// Everything happens in tx, which must be writable; window must be
// positive.
func AppendCoalesced(tx store.Tx, s Signer, tenant, kind, actor string, payload any, now time.Time, window time.Duration) (Coalesced, error) {
	if window <= 0 {
		return Coalesced{}, fmt.Errorf("receipts: append coalesced: window %v is not positive", window)
	}
	switch {
	case s == nil:
		return Coalesced{}, errors.New("receipts: append coalesced: nil signer")
	case kind == "":
		return Coalesced{}, errors.New("receipts: append coalesced: empty kind")
	}
	if err := checkTenant(tenant); err != nil {
		return Coalesced{}, err
	}
	pl, err := payloadEnc.Marshal(payload)
	if err != nil {
		return Coalesced{}, fmt.Errorf("receipts: append coalesced: payload: %w", err)
	}
	key, err := coalesceKey(tenant, kind, actor, pl)
	if err != nil {
		return Coalesced{}, fmt.Errorf("receipts: append coalesced: %w", err)
	}
	now = now.UTC()

	w, err := getWindow(tx, key)
	if err != nil {
		return Coalesced{}, err
	}
	if w != nil {
		start, end, err := w.times()
		if err != nil {
			return Coalesced{}, fmt.Errorf("receipts: append coalesced: window of receipt %s: %w", w.ReceiptID, err)
		}
		if !now.Before(start) && now.Before(end) {
			r, err := Get(tx, w.ReceiptID)
			if err != nil {
				return Coalesced{}, fmt.Errorf("receipts: append coalesced: the window's receipt: %w", err)
			}
			w.Count++
			w.Last = now.Format(timeLayout)
			if err := putWindow(tx, key, w); err != nil {
				return Coalesced{}, err
			}
			return Coalesced{Receipt: r, Count: w.Count, WindowStart: start, WindowEnd: end}, nil
		}
		if err := retire(tx, s, tenant, key, w, now); err != nil {
			return Coalesced{}, err
		}
	}
	if err := sweep(tx, s, tenant, now); err != nil {
		return Coalesced{}, err
	}
	r, err := appendEncoded(tx, s, tenant, kind, actor, pl, now)
	if err != nil {
		return Coalesced{}, err
	}
	end := now.Add(window)
	w = &windowRecord{
		ReceiptID: r.ID, Kind: kind, Actor: actor, Count: 1,
		Start: now.Format(timeLayout), End: end.Format(timeLayout), Last: now.Format(timeLayout),
	}
	if err := putWindow(tx, key, w); err != nil {
		return Coalesced{}, err
	}
	return Coalesced{Receipt: r, Count: 1, WindowStart: now, WindowEnd: end}, nil
}

// getWindow reads the window under key, or nil when there is none.
func getWindow(tx store.Tx, key []byte) (*windowRecord, error) {
	v, err := tx.Get(bucketCoalesce, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var w windowRecord
	if err := wireDec.Unmarshal(v, &w); err != nil {
		return nil, fmt.Errorf("receipts: stored coalescing window %x: %w", key, err)
	}
	return &w, nil
}

func putWindow(tx store.Tx, key []byte, w *windowRecord) error {
	v, err := payloadEnc.Marshal(w)
	if err != nil {
		return fmt.Errorf("receipts: coalescing window: %w", err)
	}
	return tx.Put(bucketCoalesce, key, v)
}

// retire ends the window under key: a summary receipt, created now, when
// it counted more than one append, then the record's deletion.
func retire(tx store.Tx, s Signer, tenant string, key []byte, w *windowRecord, now time.Time) error {
	if w.Count > 1 {
		_, err := Append(tx, s, tenant, w.Kind+SummaryKindSuffix, w.Actor, Summary{
			ReceiptID: w.ReceiptID, Kind: w.Kind, Count: w.Count,
			WindowStart: w.Start, WindowEnd: w.End, LastAt: w.Last,
		}, now)
		if err != nil {
			return fmt.Errorf("receipts: summarising the window of receipt %s: %w", w.ReceiptID, err)
		}
	}
	return tx.Delete(bucketCoalesce, key)
}

// sweep retires up to coalesceSweep windows of tenant that ended by now
// (or that start after now, the clock having gone back).
func sweep(tx store.Tx, s Signer, tenant string, now time.Time) error {
	type ended struct {
		key []byte
		w   *windowRecord
	}
	var due []ended
	err := tx.Scan(bucketCoalesce, headKey(tenant), false, func(k, v []byte) error {
		var w windowRecord
		if err := wireDec.Unmarshal(v, &w); err != nil {
			return fmt.Errorf("receipts: stored coalescing window %x: %w", k, err)
		}
		start, end, err := w.times()
		if err != nil {
			return fmt.Errorf("receipts: stored coalescing window %x: %w", k, err)
		}
		if now.Before(start) || !now.Before(end) {
			due = append(due, ended{key: append([]byte(nil), k...), w: &w})
			if len(due) == coalesceSweep {
				return store.ErrStop
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range due {
		if err := retire(tx, s, tenant, e.key, e.w, now); err != nil {
			return err
		}
	}
	return nil
}
