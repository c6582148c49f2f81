package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Format is the layout version of the records and indexes this package
// writes. [Upgrade] brings an older store to it.
//
// Versions:
//
//   - 1 (no format record): the key index holds one entry per version,
//     (tenant, key, stored entity, version) → fact id.
//   - 2: the key index holds one entry per version chain, (tenant, key,
//     stored entity) with an empty value; the versions are found in the
//     entity index. The keyword index holds blocks of postings, (tenant,
//     word, last fact id) → postings, and new facts' postings and rank
//     entries may wait in facts.fresh before they move to facts.words and
//     facts.rank. Fact ids are time-ordered; ids of
//     either kind are valid in either version.
//   - 3: the keyword index holds stemmed words (see [Words]); format 2
//     held the words as written. The document index (docs, docs.seg,
//     docs.terms, docs.stats) is new in format 3.
//   - 4: documents are indexed without a shorter list of stop words (see
//     index.IsStop): words such as "what", "how" and "over", which format 3
//     left out, are terms. The document postings and segment lengths are
//     rebuilt from the segments' text.
//   - 5: the change log of sync (sync.log, see sync.go) numbers every
//     version of the shared client facts; [Upgrade] logs the versions of
//     an older store once, in id order.
//   - 6: fact records are in a compact binary layout (see factrec.go)
//     instead of CBOR maps; [Upgrade] rewrites them.
//   - 7: the newest entries of the change log wait in sync.log.new before
//     they move to sync.log (see sync.go); a crux of format 6 would not
//     see them. Keyword posting blocks are in a compact layout (see
//     postings.go), about half their format-6 size; [Upgrade] rewrites
//     them.
//   - 8: a fact retired by a later write (a new version of its chain, or
//     a write naming it in supersedes) keeps its record as it was: its
//     entry in the entity index takes the retirement (see facts.go), which
//     a crux of format 7 would not see; and a backend may hold the newest
//     entries of the entity index in a bucket of their own (see
//     [StagedIndexes]). The keys of the confidence index (facts.rank) are
//     complemented, so that new facts' entries are appended (see
//     rankEntry); [Upgrade] rewrites them. Fact records name the standard
//     fact ids they hold (supersedes, retires, superseded_by) by their 16
//     bytes, which a crux of format 7 cannot read, and so do the entity
//     index and the change log. The keyword index keeps the greatest ids
//     of each word in a tail block keyed by the word alone (see
//     postings.go), which new facts' postings join without moving it, and
//     its blocks write a confidence of whole hundredths in a byte and the
//     first stored_at from the first id's millisecond; [Upgrade] moves
//     each word's last block there and rewrites the blocks.
//   - 9: fact records leave out the fact id, which their key holds, count
//     stored_at from the id's millisecond and write a horizon class as a
//     byte (see factrec.go); the keys of the confidence index hold a
//     standard fact id as its 16 bytes (see rankEntry), and the entity
//     index counts a retirement's end of valid time from the retiring id
//     (see entryRawAt), and a keyword posting block may give a standard
//     id by its distance from the previous one (see postings.go). A crux
//     of format 8 can read none of these.
//     [Upgrade] rewrites the confidence index; records, entity-index
//     entries and blocks written before stay as they are, and read as
//     before.
//   - 10: each keyword posting carries its word's term frequency in the
//     fact and the fact's number of words (see postings.go), and so does
//     each entry of facts.fresh, after a mark a crux of format 9 would read
//     as part of the last word; keyword queries score their candidates
//     from them. [Upgrade] rebuilds the keyword index from the fact
//     records (as it stems it for a store of format 2).
const Format = 10

// bucketMeta holds the store's format record under formatKey: the format
// version, 4 bytes big-endian.
const bucketMeta = "store.meta"

var formatKey = []byte("format")

// ErrNewerFormat reports a store written in a layout newer than [Format]:
// this version of crux cannot read it.
var ErrNewerFormat = errors.New("store: the store was written by a newer crux")

// StoredFormat returns the format version of the store: 1 when it has no
// format record.
func StoredFormat(tx Tx) (int, error) {
	v, err := tx.Get(bucketMeta, formatKey)
	if errors.Is(err, ErrNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 4 {
		return 0, fmt.Errorf("store: format record %x is not 4 bytes", v)
	}
	return int(binary.BigEndian.Uint32(v)), nil
}

// Upgrade rewrites, in tx, whatever of the store is in an older layout
// than [Format], and records the format. It returns the format the store
// had. A store already at Format is left untouched (nothing is written);
// one newer than Format is refused with [ErrNewerFormat]. Upgrade may run
// again in the same store after a rollback: each step only rewrites
// entries still in the older layout.
func Upgrade(tx Tx) (from int, err error) {
	from, err = StoredFormat(tx)
	if err != nil {
		return 0, err
	}
	switch {
	case from == Format:
		return from, nil
	case from > Format:
		return from, fmt.Errorf("%w (format %d; this crux reads up to %d)", ErrNewerFormat, from, Format)
	}
	if from < 2 {
		if err := upgradeKeyIndex(tx); err != nil {
			return from, fmt.Errorf("store: upgrading the key index: %w", err)
		}
		if err := upgradeWords(tx); err != nil {
			return from, fmt.Errorf("store: upgrading the keyword index: %w", err)
		}
	}
	if from < 4 {
		if err := reindexDocuments(tx); err != nil {
			return from, fmt.Errorf("store: re-indexing the documents: %w", err)
		}
	}
	if from < 5 {
		if err := backfillSyncLog(tx); err != nil {
			return from, fmt.Errorf("store: logging the facts for sync: %w", err)
		}
	}
	if from < 6 {
		if err := upgradeFactRecords(tx); err != nil {
			return from, fmt.Errorf("store: rewriting the fact records: %w", err)
		}
	}
	if from < 8 {
		if err := upgradeBlocks(tx); err != nil {
			return from, fmt.Errorf("store: rewriting the keyword posting blocks: %w", err)
		}
		if err := upgradeTails(tx); err != nil {
			return from, fmt.Errorf("store: moving the keyword blocks to their tail keys: %w", err)
		}
	}
	if from < 9 {
		if err := upgradeRank(tx); err != nil {
			return from, fmt.Errorf("store: rewriting the confidence index: %w", err)
		}
	}
	if from < 10 {
		// From format 3 the words are stemmed, and from format 10 the
		// postings carry their counts: both come from the fact records.
		if err := reindexWords(tx); err != nil {
			return from, fmt.Errorf("store: rebuilding the keyword index: %w", err)
		}
	}
	return from, tx.Put(bucketMeta, formatKey, binary.BigEndian.AppendUint32(nil, Format))
}

// reindexWords rebuilds the keyword index from the records of the live
// facts, with the words of the current [Words]: every entry of
// facts.fresh moves to facts.words and facts.rank first, then every
// posting block is replaced by the blocks of the facts that facts.rank
// names. A rank entry whose fact cannot be read is left for crux doctor.
func reindexWords(tx Tx) error {
	if err := flushFresh(tx, "", 0); err != nil {
		return err
	}
	var old [][]byte
	if err := tx.Scan(bucketWords, nil, false, func(k, _ []byte) error {
		old = append(old, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(bucketWords, k); err != nil {
			return err
		}
	}
	type word struct{ tenant, word string }
	byWord := make(map[word][]posting)
	var ranks [][]byte
	if err := tx.Scan(bucketRank, nil, false, func(k, _ []byte) error {
		ranks = append(ranks, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range ranks {
		tenant, rest, ok1 := bytes.Cut(k, []byte{0})
		_, rest, ok2 := bytes.Cut(rest, []byte{0})
		if !ok1 || !ok2 || len(rest) <= rankLen {
			continue
		}
		rest = rankOfEntry(rest)
		f, err := GetFact(tx, string(rest[rankLen:]))
		if err != nil {
			continue
		}
		rank := bytes.Clone(rest[:rankLen])
		words, tfs, dl := countWords(factText(f))
		for j, w := range words {
			key := word{string(tenant), w}
			byWord[key] = append(byWord[key], posting{id: f.ID, rank: rank, tf: tfs[j], dl: uint32(min(dl, tfMax))})
		}
	}
	words := make([]word, 0, len(byWord))
	for w, ps := range byWord {
		words = append(words, w)
		slices.SortFunc(ps, func(a, b posting) int { return strings.Compare(a.id, b.id) })
	}
	slices.SortFunc(words, func(a, b word) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.word, b.word))
	})
	for _, w := range words {
		if err := addPostings(tx, w.tenant, w.word, byWord[w]); err != nil {
			return err
		}
	}
	return nil
}

// upgradeRank rewrites the keys of facts.rank still in the layout of
// format 7 or 8 in that of format 9 (see [rankEntry]). A malformed key is
// left for crux doctor to report.
func upgradeRank(tx Tx) error {
	type entry struct{ old, new []byte }
	var todo []entry
	if err := tx.Scan(bucketRank, nil, false, func(k, _ []byte) error {
		parts := bytes.SplitN(k, []byte{0}, 3)
		if len(parts) < 3 || len(parts[2]) <= rankLen {
			return nil
		}
		if e := rankEntry(string(parts[0]), string(parts[1]), rankOfEntry(parts[2])); !bytes.Equal(e, k) {
			todo = append(todo, entry{bytes.Clone(k), e})
		}
		return nil
	}); err != nil {
		return err
	}
	hintWriteOnce(tx, bucketRank)
	for _, e := range todo {
		if err := tx.Delete(bucketRank, e.old); err != nil {
			return err
		}
		if err := tx.Put(bucketRank, e.new, nil); err != nil {
			return err
		}
	}
	return nil
}

// upgradeKeyIndex turns the key index's per-version entries (tenant, key,
// stored entity, NUL, 4-byte version → fact id) into one entry per chain.
// Entries with an empty value are in the new layout already, and a
// malformed entry is left for crux doctor to report.
func upgradeKeyIndex(tx Tx) error {
	var old [][]byte
	chains := make(map[string]bool)
	err := tx.Scan(bucketKey, nil, false, func(k, v []byte) error {
		if len(v) == 0 || len(k) < 6 || k[len(k)-5] != 0 {
			return nil
		}
		old = append(old, bytes.Clone(k))
		chains[string(k[:len(k)-5])] = true
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(bucketKey, k); err != nil {
			return err
		}
	}
	for k := range chains {
		if err := tx.Put(bucketKey, []byte(k), nil); err != nil {
			return err
		}
	}
	return nil
}

// upgradeWords turns the keyword index's one-posting entries (tenant, word,
// fact id → 16-byte rank prefix) into blocks (see postings.go). A block's
// value is never 16 bytes long (each posting takes at least 18), so the
// entries still in the old layout are told apart by their length.
func upgradeWords(tx Tx) error {
	type word struct{ tenant, word string }
	var old [][]byte
	var words []word
	byWord := make(map[word][]posting)
	err := tx.Scan(bucketWords, nil, false, func(k, v []byte) error {
		if len(v) != rankLen {
			return nil
		}
		t, rest, ok1 := bytes.Cut(k, []byte{0})
		w, id, ok2 := bytes.Cut(rest, []byte{0})
		if !ok1 || !ok2 || len(id) == 0 {
			return nil // malformed: crux doctor reports it
		}
		old = append(old, bytes.Clone(k))
		key := word{string(t), string(w)}
		if _, ok := byWord[key]; !ok {
			words = append(words, key)
		}
		// Scan order is key order: each word's ids come sorted.
		byWord[key] = append(byWord[key], posting{id: string(id), rank: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(bucketWords, k); err != nil {
			return err
		}
	}
	for _, w := range words {
		if err := addPostings(tx, w.tenant, w.word, byWord[w]); err != nil {
			return err
		}
	}
	return nil
}

// UpgradeBackend brings the store of b to [Format] (see [Upgrade]), in one
// transaction, and returns the format it had. It reads first, so a store
// already at Format costs no write and may be read-only.
func UpgradeBackend(ctx context.Context, b Backend) (from int, err error) {
	err = b.View(ctx, func(tx Tx) error {
		from, err = StoredFormat(tx)
		return err
	})
	if err != nil || from == Format {
		return from, err
	}
	if from > Format {
		return from, fmt.Errorf("%w (format %d; this crux reads up to %d)", ErrNewerFormat, from, Format)
	}
	err = b.Update(ctx, func(tx Tx) error {
		from, err = Upgrade(tx)
		return err
	})
	return from, err
}
