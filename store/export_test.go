package store

import "fmt"

// Postings returns every keyword posting of the store as "tenant NUL word
// NUL fact id" → 16-byte rank prefix, whether it is kept one per entry
// (format 1) or in blocks, for tests.
func Postings(tx Tx) (map[string]string, error) {
	return postingsAs(tx, func(p posting) string { return string(p.rank) })
}

// postingsAs returns every keyword posting of the store as "tenant NUL
// word NUL fact id" → show(posting) (the entry's value, for one kept one
// per entry, and "malformed" for a block that does not decode).
func postingsAs(tx Tx, show func(posting) string) (map[string]string, error) {
	out := map[string]string{}
	err := tx.Scan(bucketWords, nil, false, func(k, v []byte) error {
		if len(v) == rankLen {
			out[string(k)] = string(v)
			return nil
		}
		tenant, word, _, ok := parseBlockKey(k)
		ps, err := decodeBlock(v)
		if !ok || err != nil {
			out[string(k)] = "malformed"
			return nil
		}
		for _, p := range ps {
			out[string(indexKey(tenant, word, p.id))] = show(p)
		}
		return nil
	})
	return out, err
}

// DocIndex returns the document index of tenant as text, for tests: each
// posting as "term seq tf dl", sorted by term then seq, then the
// segments as "seq doc index len", then the statistics. Segments are
// numbered by their order, not their seq, so that two indexes holding the
// same documents in the same order compare equal however they were built.
func DocIndex(tx Tx, tenant string) ([]string, error) {
	stats, err := ReadDocStats(tx, tenant)
	if err != nil {
		return nil, err
	}
	order := map[uint32]int{}
	var out, segs []string
	err = tx.Scan(bucketDocSegs, append([]byte(tenant), 0), false, func(k, v []byte) error {
		seq := uint32(k[len(k)-4])<<24 | uint32(k[len(k)-3])<<16 | uint32(k[len(k)-2])<<8 | uint32(k[len(k)-1])
		rec, err := getSegRecord(tx, k)
		if err != nil {
			return err
		}
		order[seq] = len(order)
		segs = append(segs, fmt.Sprintf("seg %d %s %d %d", order[seq], rec.Doc, rec.Index, rec.Len))
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Scan(bucketDocTerms, append([]byte(tenant), 0), false, func(k, v []byte) error {
		ps, err := decodeDocBlock(nil, v)
		if err != nil {
			return err
		}
		term := string(k[len(tenant)+1 : len(k)-5])
		if len(ps) == 0 || ps[0].seq != uint32(k[len(k)-4])<<24|uint32(k[len(k)-3])<<16|uint32(k[len(k)-2])<<8|uint32(k[len(k)-1]) {
			return fmt.Errorf("block %q is not keyed by its first posting", k)
		}
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s %d %d %d", term, order[p.seq], p.tf, p.dl))
		}
		return nil
	})
	stats.Next = 0 // seqs differ between builds
	return append(append(out, segs...), fmt.Sprintf("stats %+v", stats)), err
}

// AddPosting adds the posting of the fact id, with rank, to the blocks of
// word in tenant, for tests.
func AddPosting(tx Tx, tenant, word, id string, rank []byte) error {
	return addPostings(tx, tenant, word, []posting{{id: id, rank: rank}})
}

// RemovePosting removes the posting of the fact id from the blocks of word
// in tenant, for tests.
func RemovePosting(tx Tx, tenant, word, id string) error {
	return removePosting(tx, tenant, word, id)
}

// BlockIDs decodes the block value v into its fact ids, for tests.
func BlockIDs(v []byte) ([]string, error) {
	ps, err := decodeBlock(v)
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	return ids, err
}

// UpgradedBlock is the block value v rewritten in the layout of [Format],
// for tests.
func UpgradedBlock(v []byte) (string, error) {
	ps, err := decodeBlock(v)
	return string(encodeBlock(ps)), err
}

// PostingsOf returns the keyword postings that the facts.words entries m
// (key → value, in any layout) hold, as [Postings] does, for tests.
func PostingsOf(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		tenant, word, _, ok := parseBlockKey([]byte(k))
		ps, err := decodeBlock([]byte(v))
		if !ok || err != nil {
			out[k] = "malformed"
			continue
		}
		for _, p := range ps {
			out[string(indexKey(tenant, word, p.id))] = string(p.rank)
		}
	}
	return out
}

// CountedPostings returns every keyword posting of the store as "tenant
// NUL word NUL fact id" → its 16-byte rank prefix, a space, and its term
// frequency and the fact's number of words (0 0 when it carries none),
// for tests.
func CountedPostings(tx Tx) (map[string]string, error) {
	return postingsAs(tx, func(p posting) string { return fmt.Sprintf("%s %d %d", p.rank, p.tf, p.dl) })
}
