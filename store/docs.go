package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/klauspost/compress/s2"

	"github.com/crux-go/crux/index"
)

// Documents and the retrieval index.
//
// A tenant's documents are cut into segments (index.Segment), and each
// segment is numbered in the tenant, in the order segments are written:
// its seq, never reused. The layout:
//
//   - docs: tenant, document id → the document record: title, the seq of
//     its first segment (its segments have consecutive seqs), how many,
//     their tokens, when it was ingested.
//   - docs.seg: tenant, 4-byte seq → the segment record: document id and
//     title, segment index, text, length in terms. Seqs grow, so new records
//     append.
//   - docs.terms: tenant, term, 4-byte seq of the block's first posting →
//     a block of up to docBlockMax postings of the term, sorted by seq:
//     seq, term frequency and the segment's length, so that ranking reads
//     posting blocks and nothing else. New segments' postings are appended
//     to each term's last block.
//   - docs.stats: tenant → segments, documents, terms in all (for the
//     average length) and the next seq.
//
// A document is written, replaced and removed in one transaction with
// every entry that indexes it, so the index always holds whole documents.
const (
	bucketDocs     = "docs"
	bucketDocSegs  = "docs.seg"
	bucketDocTerms = "docs.terms"
	bucketDocStats = "docs.stats"
)

// Limits of a document.
const (
	// MaxDocIDBytes caps a document id.
	MaxDocIDBytes = 512
	// MaxDocTitleBytes caps a document title.
	MaxDocTitleBytes = 1024
	// MaxDocTextBytes caps a document's text.
	MaxDocTextBytes = 8 << 20
	// docBlockMax is the most postings one block of docs.terms holds.
	docBlockMax = 128
)

// Document is a text to index: its id (unique in its tenant; ingesting an
// id again replaces the document), an optional title, and its text.
type Document struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Text  string `json:"text"`
}

// DocumentError reports a document that cannot be indexed, and why.
type DocumentError struct {
	ID     string // the document's id, as given
	Field  string // id, title or text
	Reason string
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("store: document %q: %s %s", e.ID, e.Field, e.Reason)
}

// CheckDocument reports whether d can be indexed: a non-empty id without
// control characters, all of it valid UTF-8, within the limits above.
func CheckDocument(d *Document) error {
	bad := func(field, reason string) error { return &DocumentError{ID: d.ID, Field: field, Reason: reason} }
	switch {
	case d.ID == "":
		return bad("id", "is empty")
	case len(d.ID) > MaxDocIDBytes:
		return bad("id", fmt.Sprintf("is longer than %d bytes", MaxDocIDBytes))
	case !utf8.ValidString(d.ID) || strings.IndexFunc(d.ID, unicode.IsControl) >= 0:
		return bad("id", "must be UTF-8 text without control characters")
	case len(d.Title) > MaxDocTitleBytes:
		return bad("title", fmt.Sprintf("is longer than %d bytes", MaxDocTitleBytes))
	case !utf8.ValidString(d.Title):
		return bad("title", "is not valid UTF-8")
	case len(d.Text) > MaxDocTextBytes:
		return bad("text", fmt.Sprintf("is longer than %d bytes", MaxDocTextBytes))
	case !utf8.ValidString(d.Text):
		return bad("text", "is not valid UTF-8")
	}
	return nil
}

// PreparedDocument is a document analysed for the index, ready to write
// with [PutDocuments]: analysis costs CPU and is done before the
// transaction that writes it.
type PreparedDocument struct {
	Document
	Segments []PreparedSegment
}

// PreparedSegment is one segment of a prepared document.
type PreparedSegment struct {
	Text   string
	Len    int        // terms of the segment, its title's included
	Terms  []termFreq // distinct terms, sorted
	Tokens int        // EstimateTokens(Text)
}

type termFreq struct {
	term string
	tf   int
}

// PrepareDocument checks d and analyses it: segments, and each segment's
// terms (the title's terms count in every segment). a may be nil; a
// caller preparing many documents passes one Analyzer for all.
func PrepareDocument(d Document, a *index.Analyzer) (PreparedDocument, error) {
	if err := CheckDocument(&d); err != nil {
		return PreparedDocument{}, err
	}
	if a == nil {
		a = new(index.Analyzer)
	}
	p := PreparedDocument{Document: d}
	segs := index.Segment(d.Text)
	if len(segs) == 0 {
		segs = []string{""} // a document of only a title, or empty: one segment, found by its title
	}
	counts := make(map[string]int)
	for _, s := range segs {
		n := countTerms(a, d.Title, s, counts)
		ps := PreparedSegment{Text: s, Len: n, Tokens: EstimateTokens(s), Terms: make([]termFreq, 0, len(counts))}
		for t, c := range counts {
			ps.Terms = append(ps.Terms, termFreq{t, c})
		}
		slices.SortFunc(ps.Terms, func(x, y termFreq) int { return strings.Compare(x.term, y.term) })
		p.Segments = append(p.Segments, ps)
	}
	return p, nil
}

// countTerms sets counts to the term frequencies of a segment of text in a
// document titled title (the title's terms count in every segment) and
// returns the segment's length in terms.
func countTerms(a *index.Analyzer, title, text string, counts map[string]int) int {
	clear(counts)
	n := 0
	add := func(t string) { counts[t]++; n++ }
	a.Terms(title, add)
	a.Terms(text, add)
	return n
}

// docRecord is a document as docs holds it (its id is the key's).
type docRecord struct {
	First      uint32 `cbor:"1,keyasint"` // seq of segment 0
	Segments   int    `cbor:"2,keyasint"`
	Tokens     int    `cbor:"3,keyasint"`
	IngestedAt int64  `cbor:"4,keyasint"` // Unix seconds
}

// segRecord is a segment as docs.seg holds it: in binary, not CBOR, so
// that a result reads the fields it shows without decoding the rest.
// The value is, as uvarints and strings each prefixed by its length: the
// document id, the segment index, the length in terms, the document
// title; then a byte saying how the text follows, to the end: 0 as it
// is, 1 compressed with S2 (github.com/klauspost/compress/s2), which
// decodes a segment in a fraction of a microsecond and is used when it
// saves a tenth of the text or more.
type segRecord struct {
	Doc   string
	Index int
	Len   int
	Title string
	Text  string
}

func (r *segRecord) encode() []byte {
	b := make([]byte, 0, 16+len(r.Doc)+len(r.Title)+len(r.Text))
	b = binary.AppendUvarint(b, uint64(len(r.Doc)))
	b = append(b, r.Doc...)
	b = binary.AppendUvarint(b, uint64(r.Index))
	b = binary.AppendUvarint(b, uint64(r.Len))
	b = binary.AppendUvarint(b, uint64(len(r.Title)))
	b = append(b, r.Title...)
	if z := s2.EncodeBetter(nil, []byte(r.Text)); len(z) <= len(r.Text)*9/10 {
		return append(append(b, textS2), z...)
	}
	return append(append(b, textRaw), r.Text...)
}

// How a segment record's text is stored.
const (
	textRaw byte = 0
	textS2  byte = 1
)

var errBadSegment = errors.New("store: malformed segment record")

// decodeSegHeader decodes what a segment record holds before its text
// (see segRecord.encode): the document id, the segment's index and
// length, and the title, copied; rest is the text's bytes.
func decodeSegHeader(v []byte) (doc string, index, n int, title string, rest []byte, ok bool) {
	field := func() (int, bool) {
		x, k := binary.Uvarint(v)
		if k <= 0 || x > 1<<31 {
			return 0, false
		}
		v = v[k:]
		return int(x), true
	}
	str := func() (string, bool) {
		n, ok := field()
		if !ok || n > len(v) {
			return "", false
		}
		s := string(v[:n])
		v = v[n:]
		return s, true
	}
	if doc, ok = str(); !ok {
		return
	}
	if index, ok = field(); !ok {
		return
	}
	if n, ok = field(); !ok {
		return
	}
	if title, ok = str(); !ok {
		return
	}
	return doc, index, n, title, v, true
}

// decodeSegRecord decodes v; the strings are copies, valid after the
// transaction.
func decodeSegRecord(v []byte) (*segRecord, error) {
	var r segRecord
	var ok bool
	if r.Doc, r.Index, r.Len, r.Title, v, ok = decodeSegHeader(v); !ok {
		return nil, errBadSegment
	}
	if len(v) == 0 {
		return nil, errBadSegment
	}
	switch v[0] {
	case textRaw:
		r.Text = string(v[1:])
	case textS2:
		text, err := s2.Decode(nil, v[1:])
		if err != nil {
			return nil, errBadSegment
		}
		r.Text = string(text)
	default:
		return nil, errBadSegment
	}
	if !utf8.ValidString(r.Doc) || !utf8.ValidString(r.Title) || !utf8.ValidString(r.Text) {
		return nil, errBadSegment
	}
	return &r, nil
}

// DocStats is the size of a tenant's document index.
type DocStats struct {
	Documents int    `cbor:"1,keyasint"`
	Segments  int    `cbor:"2,keyasint"`
	Terms     int64  `cbor:"3,keyasint"` // segment lengths summed
	Next      uint32 `cbor:"4,keyasint"` // the seq the next segment gets
}

// AvgLen is the average segment length in terms.
func (s DocStats) AvgLen() float64 {
	if s.Segments == 0 {
		return 0
	}
	return float64(s.Terms) / float64(s.Segments)
}

func docKey(tenant, id string) []byte { return indexKey(tenant, id) }

func segKey(tenant string, seq uint32) []byte { return appendSegKey(nil, tenant, seq) }

// appendSegKey appends segKey(tenant, seq) to dst.
func appendSegKey(dst []byte, tenant string, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(append(append(dst, tenant...), 0), seq)
}

func termPrefix(tenant, term string) []byte { return indexKey(tenant, term, "") }

// ReadDocStats returns the size of tenant's document index.
func ReadDocStats(tx Tx, tenant string) (DocStats, error) {
	var s DocStats
	v, err := tx.Get(bucketDocStats, []byte(tenant))
	if errors.Is(err, ErrNotFound) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if s, ok := decodeDocStats(v); ok {
		return s, nil
	}
	if err := factDec.Unmarshal(v, &s); err != nil {
		return s, fmt.Errorf("store: document statistics of tenant %q: %w", tenant, err)
	}
	return s, nil
}

// decodeDocStats decodes the CBOR that putDocStats writes (a map of the
// four fields, keys 1 to 4 in order, each an unsigned integer), which
// every query reads, without the reflection of the general decoder; false
// for any other shape, which the general decoder reads.
func decodeDocStats(v []byte) (DocStats, bool) {
	if len(v) == 0 || v[0] != 0xa4 { // a map of four pairs
		return DocStats{}, false
	}
	var x [4]uint64
	i := 1
	for k := range x {
		if i >= len(v) || v[i] != byte(k+1) {
			return DocStats{}, false
		}
		i++
		if i >= len(v) || v[i]>>5 != 0 { // an unsigned integer
			return DocStats{}, false
		}
		n := 0 // bytes after the head
		switch info := v[i] & 0x1f; {
		case info < 24:
			x[k] = uint64(info)
		case info <= 27:
			n = 1 << (info - 24)
		default:
			return DocStats{}, false
		}
		i++
		if i+n > len(v) {
			return DocStats{}, false
		}
		for _, b := range v[i : i+n] {
			x[k] = x[k]<<8 | uint64(b)
		}
		i += n
	}
	if i != len(v) || x[0] > math.MaxInt || x[1] > math.MaxInt || x[2] > math.MaxInt64 || x[3] > math.MaxUint32 {
		return DocStats{}, false
	}
	return DocStats{Documents: int(x[0]), Segments: int(x[1]), Terms: int64(x[2]), Next: uint32(x[3])}, true
}

func putDocStats(tx Tx, tenant string, s DocStats) error {
	b, err := factEnc.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Put(bucketDocStats, []byte(tenant), b)
}

// IngestStats counts what [PutDocuments] wrote.
type IngestStats struct {
	Documents int `json:"documents"` // documents written
	Replaced  int `json:"replaced"`  // of which replaced an earlier version
	Segments  int `json:"segments"`
	Tokens    int `json:"tokens"`
}

// PutDocuments writes docs to tenant's index, each replacing the document
// of the same id. When docs repeats an id, the last one is written.
func PutDocuments(tx Tx, tenant string, docs []PreparedDocument, now time.Time) (IngestStats, error) {
	var st IngestStats
	if tenant == "" {
		return st, errors.New("store: empty tenant")
	}
	stats, err := ReadDocStats(tx, tenant)
	if err != nil {
		return st, err
	}
	last := make(map[string]int, len(docs))
	for i := range docs {
		last[docs[i].ID] = i
	}
	pending := make(map[string][]docPosting)
	var a index.Analyzer             // for the documents replaced, whose terms are found again
	hintWriteOnce(tx, bucketDocSegs) // seqs grow; a segment is never rewritten
	hintAppend(tx, bucketDocs)       // ids mostly come in order, files of a directory sorted
	if stats.Segments == 0 && stats.Next == 0 {
		// The tenant's first documents: its posting blocks are new keys
		// in one range, written in order, so their pages can be filled.
		// Later batches add to those blocks and split the pages they
		// touch, the default way.
		hintWriteOnce(tx, bucketDocTerms)
	}
	for i := range docs {
		d := &docs[i]
		if last[d.ID] != i {
			continue
		}
		removed, err := removeDocument(tx, tenant, d.ID, &stats, &a)
		if err != nil {
			return st, err
		}
		if removed {
			st.Replaced++
		}
		if stats.Next > ^uint32(0)-uint32(len(d.Segments)) {
			return st, fmt.Errorf("store: tenant %q has used every segment number", tenant)
		}
		rec := docRecord{First: stats.Next, Segments: len(d.Segments), IngestedAt: now.Unix()}
		for j, s := range d.Segments {
			seq := stats.Next
			stats.Next++
			seg := segRecord{Doc: d.ID, Index: j, Len: s.Len, Title: d.Title, Text: s.Text}
			if err := tx.Put(bucketDocSegs, segKey(tenant, seq), seg.encode()); err != nil {
				return st, err
			}
			for _, t := range s.Terms {
				pending[t.term] = append(pending[t.term], docPosting{seq: seq, tf: uint32(t.tf), dl: uint32(s.Len)})
			}
			rec.Tokens += s.Tokens
			stats.Segments++
			stats.Terms += int64(s.Len)
		}
		b, err := encodeRecord("document "+d.ID, rec)
		if err != nil {
			return st, err
		}
		if err := tx.Put(bucketDocs, docKey(tenant, d.ID), b); err != nil {
			return st, err
		}
		stats.Documents++
		st.Documents++
		st.Segments += rec.Segments
		st.Tokens += rec.Tokens
	}
	terms := make([]string, 0, len(pending))
	for t := range pending {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		if err := appendPostings(tx, tenant, t, pending[t]); err != nil {
			return st, err
		}
	}
	return st, putDocStats(tx, tenant, stats)
}

// DeleteDocument removes the document id of tenant and its index entries,
// reporting whether there was one.
func DeleteDocument(tx Tx, tenant, id string) (bool, error) {
	stats, err := ReadDocStats(tx, tenant)
	if err != nil {
		return false, err
	}
	removed, err := removeDocument(tx, tenant, id, &stats, new(index.Analyzer))
	if err != nil || !removed {
		return false, err
	}
	return true, putDocStats(tx, tenant, stats)
}

// removeDocument removes the document id, its segments and postings, and
// counts them out of stats; it reports whether there was one.
func removeDocument(tx Tx, tenant, id string, stats *DocStats, a *index.Analyzer) (bool, error) {
	rec, err := getDocRecord(tx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	bySeq := make(map[string][]uint32)
	for i := range rec.Segments {
		seq := rec.First + uint32(i)
		key := segKey(tenant, seq)
		s, err := getSegRecord(tx, key)
		if err == nil {
			seen := make(map[string]bool)
			add := func(t string) {
				if !seen[t] {
					seen[t] = true
					bySeq[t] = append(bySeq[t], seq)
				}
			}
			a.Terms(s.Title, add)
			a.Terms(s.Text, add)
			stats.Segments--
			stats.Terms -= int64(s.Len)
		} else if !errors.Is(err, ErrNotFound) && !errors.As(err, new(*CorruptRecordError)) {
			return false, err
		}
		if err := tx.Delete(bucketDocSegs, key); err != nil {
			return false, err
		}
	}
	terms := make([]string, 0, len(bySeq))
	for t := range bySeq {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for _, t := range terms {
		if err := removePostings(tx, tenant, t, bySeq[t]); err != nil {
			return false, err
		}
	}
	stats.Documents--
	return true, tx.Delete(bucketDocs, docKey(tenant, id))
}

func getDocRecord(tx Tx, tenant, id string) (*docRecord, error) {
	v, err := tx.Get(bucketDocs, docKey(tenant, id))
	if err != nil {
		return nil, err
	}
	var rec docRecord
	if err := factDec.Unmarshal(v, &rec); err != nil {
		return nil, &CorruptRecordError{Bucket: bucketDocs, Key: docKey(tenant, id), ID: id, Err: err}
	}
	return &rec, nil
}

func getSegRecord(tx Tx, key []byte) (*segRecord, error) {
	v, err := tx.Get(bucketDocSegs, key)
	if err != nil {
		return nil, err
	}
	rec, err := decodeSegRecord(v)
	if err != nil {
		return nil, &CorruptRecordError{Bucket: bucketDocSegs, Key: bytes.Clone(key), Err: err}
	}
	return rec, nil
}

// docPosting is one posting of docs.terms.
type docPosting struct {
	seq, tf, dl uint32
}

// encodeDocBlock encodes postings sorted by seq: their count, then each
// posting as the uvarints seq delta (from 0 for the first), tf and dl.
func encodeDocBlock(ps []docPosting) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 1+len(ps)*5), uint64(len(ps)))
	prev := uint32(0)
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(p.seq-prev))
		b = binary.AppendUvarint(b, uint64(p.tf))
		b = binary.AppendUvarint(b, uint64(p.dl))
		prev = p.seq
	}
	return b
}

var errBadDocBlock = errors.New("store: malformed document posting block")

// docBlockLen returns the number of postings of an encoded block.
func docBlockLen(v []byte) (int, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || n == 0 || n > docBlockMax {
		return 0, errBadDocBlock
	}
	return int(n), nil
}

// decodeDocBlock appends the postings of v to dst.
func decodeDocBlock(dst []docPosting, v []byte) ([]docPosting, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || n == 0 || n > docBlockMax {
		return dst, errBadDocBlock
	}
	v = v[k:]
	prev := uint64(0)
	for range n {
		var f [3]uint64
		for i := range f {
			x, k := binary.Uvarint(v)
			if k <= 0 || x > 1<<32-1 {
				return dst, errBadDocBlock
			}
			f[i], v = x, v[k:]
		}
		prev += f[0]
		if prev > 1<<32-1 {
			return dst, errBadDocBlock
		}
		dst = append(dst, docPosting{seq: uint32(prev), tf: uint32(f[1]), dl: uint32(f[2])})
	}
	if len(v) != 0 {
		return dst, errBadDocBlock
	}
	return dst, nil
}

// appendPostings adds ps, sorted by seq and all past the term's postings,
// to the term's blocks: the last block is filled first.
func appendPostings(tx Tx, tenant, term string, ps []docPosting) error {
	prefix := termPrefix(tenant, term)
	var lastKey, lastVal []byte
	err := tx.Scan(bucketDocTerms, prefix, true, func(k, v []byte) error {
		lastKey, lastVal = bytes.Clone(k), bytes.Clone(v)
		return ErrStop
	})
	if err != nil {
		return err
	}
	if lastKey != nil {
		old, err := decodeDocBlock(nil, lastVal)
		if err == nil && len(old) < docBlockMax {
			n := min(docBlockMax-len(old), len(ps))
			if err := tx.Put(bucketDocTerms, lastKey, encodeDocBlock(append(old, ps[:n]...))); err != nil {
				return err
			}
			ps = ps[n:]
		}
	}
	for len(ps) > 0 {
		n := min(docBlockMax, len(ps))
		key := binary.BigEndian.AppendUint32(bytes.Clone(prefix), ps[0].seq)
		if err := tx.Put(bucketDocTerms, key, encodeDocBlock(ps[:n])); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// removePostings drops the postings of seqs (sorted) from the term's
// blocks, rewriting the blocks that held them.
func removePostings(tx Tx, tenant, term string, seqs []uint32) error {
	prefix := termPrefix(tenant, term)
	type change struct {
		key []byte
		ps  []docPosting
	}
	var changes []change
	err := tx.Scan(bucketDocTerms, prefix, false, func(k, v []byte) error {
		if len(k) != len(prefix)+4 {
			return nil
		}
		first := binary.BigEndian.Uint32(k[len(prefix):])
		if first > seqs[len(seqs)-1] {
			return ErrStop
		}
		ps, err := decodeDocBlock(nil, v)
		if err != nil {
			return nil // crux doctor reports it
		}
		kept := slices.DeleteFunc(slices.Clone(ps), func(p docPosting) bool {
			_, found := slices.BinarySearch(seqs, p.seq)
			return found
		})
		if len(kept) != len(ps) {
			changes = append(changes, change{bytes.Clone(k), kept})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range changes {
		if err := tx.Delete(bucketDocTerms, c.key); err != nil {
			return err
		}
		if len(c.ps) == 0 {
			continue
		}
		key := binary.BigEndian.AppendUint32(bytes.Clone(prefix), c.ps[0].seq)
		if err := tx.Put(bucketDocTerms, key, encodeDocBlock(c.ps)); err != nil {
			return err
		}
	}
	return nil
}

// reindexDocuments rebuilds every tenant's document postings from its
// segments, with the terms of the current analyser: the posting blocks
// are replaced, each segment's length in terms is rewritten where it
// changed, and the tenants' term totals follow. A segment that cannot be
// read is left for crux doctor, as are its stale postings' absence.
func reindexDocuments(tx Tx) error {
	var old, tenants [][]byte
	if err := tx.Scan(bucketDocTerms, nil, false, func(k, _ []byte) error {
		old = append(old, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range old {
		if err := tx.Delete(bucketDocTerms, k); err != nil {
			return err
		}
	}
	if err := tx.Scan(bucketDocStats, nil, false, func(k, _ []byte) error {
		tenants = append(tenants, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	var a index.Analyzer
	for _, tenant := range tenants {
		stats, err := ReadDocStats(tx, string(tenant))
		if err != nil {
			return err
		}
		type rewrite struct {
			key []byte
			rec *segRecord
		}
		var rewrites []rewrite
		pending := make(map[string][]docPosting)
		counts := make(map[string]int)
		stats.Terms = 0
		err = tx.Scan(bucketDocSegs, append(bytes.Clone(tenant), 0), false, func(k, v []byte) error {
			if len(k) != len(tenant)+5 {
				return nil
			}
			rec, err := decodeSegRecord(v)
			if err != nil {
				return nil // crux doctor reports it
			}
			n := countTerms(&a, rec.Title, rec.Text, counts)
			seq := binary.BigEndian.Uint32(k[len(tenant)+1:])
			for t, c := range counts {
				pending[t] = append(pending[t], docPosting{seq: seq, tf: uint32(c), dl: uint32(n)})
			}
			if n != rec.Len {
				rec.Len = n
				rewrites = append(rewrites, rewrite{bytes.Clone(k), rec})
			}
			stats.Terms += int64(n)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range rewrites {
			if err := tx.Put(bucketDocSegs, r.key, r.rec.encode()); err != nil {
				return err
			}
		}
		terms := make([]string, 0, len(pending))
		for t := range pending {
			terms = append(terms, t)
		}
		slices.Sort(terms)
		for _, t := range terms {
			if err := appendPostings(tx, string(tenant), t, pending[t]); err != nil {
				return err
			}
		}
		if err := putDocStats(tx, string(tenant), stats); err != nil {
			return err
		}
	}
	return nil
}
