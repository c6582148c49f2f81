package store

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"time"
)

// ExportQuery selects the facts of an audit export: the versions of a
// tenant's shared facts stored in [Since, Until), deleted ones left out.
type ExportQuery struct {
	Tenant string
	// EntityPrefix restricts the export to entities starting with it.
	EntityPrefix string
	// IncludeReserved adds crux's own reserved entities (those starting
	// with [ReservedPrefix]), agents' private facts still excepted.
	IncludeReserved bool
	Since, Until    time.Time
	// TokenBudget caps the sum of the selected facts' token counts; the
	// first fact is always selected. MaxFacts caps how many are selected,
	// and MaxScan how many index entries are examined.
	TokenBudget int
	MaxFacts    int
	MaxScan     int
}

// ExportSelection is what [SelectExport] selected.
type ExportSelection struct {
	// Facts are the selected versions, sorted by stored_at, then id.
	Facts []*Fact
	// Matched counts the versions in the window that were examined;
	// Truncated reports that fewer were selected, by the budget or
	// MaxFacts, or that the scan stopped at MaxScan (ScanTruncated).
	Matched       int
	Tokens        int
	Truncated     bool
	ScanTruncated bool
}

// SelectExport selects the facts of q in tx. It walks the tenant's entity
// index under the prefix (every version of every chain), reads each
// version once, keeps those in the window, sorts them by stored_at and id,
// and selects from the oldest while the token budget and MaxFacts allow.
// The walk reads at most MaxScan entries; an unreadable record is skipped
// and reported as scans report them.
func SelectExport(tx Tx, q ExportQuery) (ExportSelection, error) {
	type cand struct {
		at     time.Time
		id     string
		tokens int
	}
	var cands []cand
	var sel ExportSelection
	scanned := 0
	prefix := indexKey(q.Tenant, q.EntityPrefix)
	err := tx.Scan(bucketEntity, prefix, false, func(k, v []byte) error {
		if scanned == q.MaxScan {
			sel.ScanTruncated = true
			return ErrStop
		}
		scanned++
		rest := k[len(q.Tenant)+1:]
		stored, _, _ := bytes.Cut(rest, []byte{0})
		if bytes.HasPrefix(stored, []byte(PrivatePrefix)) ||
			(!q.IncludeReserved && bytes.HasPrefix(stored, []byte(ReservedPrefix))) {
			return nil
		}
		f, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		if f.Private || f.Deleted || f.Tenant != q.Tenant || !strings.HasPrefix(f.Entity, q.EntityPrefix) ||
			f.StoredAt.Before(q.Since) || !f.StoredAt.Before(q.Until) {
			return nil
		}
		cands = append(cands, cand{at: f.StoredAt, id: f.ID, tokens: f.Tokens})
		return nil
	})
	if err != nil {
		return ExportSelection{}, err
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(a.at.Compare(b.at), strings.Compare(a.id, b.id)) })
	sel.Matched = len(cands)
	for i, c := range cands {
		if i > 0 && (sel.Tokens+c.tokens > q.TokenBudget || len(sel.Facts) == q.MaxFacts) {
			sel.Truncated = true
			break
		}
		f, err := GetFact(tx, c.id)
		if err != nil {
			return ExportSelection{}, err
		}
		sel.Facts = append(sel.Facts, f)
		sel.Tokens += c.tokens
	}
	sel.Truncated = sel.Truncated || sel.ScanTruncated
	return sel, nil
}
