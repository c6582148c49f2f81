package store

// Postings returns every keyword posting of the store as "tenant NUL word
// NUL fact id" → 16-byte rank prefix, whether it is kept one per entry
// (format 1) or in blocks, for tests.
func Postings(tx Tx) (map[string]string, error) {
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
			out[string(indexKey(tenant, word, p.id))] = string(p.rank)
		}
		return nil
	})
	return out, err
}
