package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The keyword index (facts.words) keeps the postings of a word in blocks:
// the postings of one word in one tenant, sorted by fact id, at most
// blockMax to a block, under the key (tenant, word, the block's last fact
// id), except the word's tail block, which holds its greatest ids, under
// (tenant, word, tailMark) from format 8. The blocks of a word cover
// disjoint ranges of ids, in key order. A
// posting is a fact id and the fact's 16-byte rank prefix (^confidence,
// ^stored_at), so that keyword queries order their candidates without
// reading them.
//
// One posting per key cost a key of its own (tenant, word and id again) and
// a bbolt element header for every word of every fact, and as many leaves
// to write; in blocks, a word's postings share one key per block, and ids
// being time-ordered, the postings of new facts are appended to the tail
// block of each word (see flushFresh), whose key stays put; once full, its
// blockMax first postings move to a block of their own, under their last
// id. A word of one or a few facts (most words) thus has a single block
// whose key holds no fact id: format 7 keyed every block by its last id,
// 34 bytes more for a standard id, and split a full last block into two
// half blocks. [Upgrade] moves each word's last block to its tail key.
//
// A block's value (from format 7) is the byte blockMark, then its postings
// one after the other, each a flags byte and:
//
//   - the id: when flagStdID is set, a standard fact id ("f_" and 32 hex
//     digits, 16 bytes) as the zigzag varint of its first 6 bytes (the
//     millisecond of a time-ordered id) less those of the block's previous
//     standard id, then its last 10 bytes; else a uvarint length and the
//     id's bytes;
//   - the 8 bytes of ^confidence, unless flagSameConf says they are the
//     previous posting's;
//   - ^stored_at as the zigzag varint of its difference from the previous
//     posting's (0 before the first).
//
// From format 8, whose blocks start with blockMark where those of format 7
// start with blockMark7, a confidence of whole hundredths (0, 0.01, ...,
// 1) takes one byte, its hundredths, under flagConfPct; and when the first
// id is standard, the first ^stored_at is counted from ^(its millisecond
// × 10⁶) instead of 0. A block of one posting, as most words have, takes
// about 22 bytes instead of 35.
//
// From format 9, a standard id made in the same millisecond as the
// previous posting's, and so one more than it or a little more (see
// [NewOrderedID]: facts written together, by one caller quickly or by
// several at once), is under flagSeqID the uvarint of its distance from
// it, in place of the millisecond and the 10 bytes: one byte of eleven.
//
// From format 10, whose blocks start with blockMark10, a posting also
// carries what BM25 needs of its fact (see relevance.go), so that a
// keyword query scores its candidates without reading them: the word's
// term frequency tf (how many of the fact's words have it as their stem)
// in the flag bits flagTF, 1 to 6 as they are and 7 for 7 or more, the
// uvarint of tf − 7 then following ^stored_at, and after it the fact's
// number of words dl as a uvarint. A posting whose flagTF bits are 0
// carries neither (a posting moved from a block of an older layout, or
// from an entry of facts.fresh written before them); a query reads its
// fact for them. [Upgrade] rebuilds the keyword index of an older store
// from the fact records, counts included.
//
// A posting of a new fact takes 15 to 18 bytes, against 33 in the layout
// of format 6 (a length byte L, the id: L bytes, or when L is 0 the 16
// bytes of a standard id; and the 16 rank bytes), which [decodeBlock]
// still reads, as it reads format 7: a value that starts with neither
// mark, or does but does not decode (a format-6 block whose first id is
// 253 or 254 bytes long) is in that layout. [Upgrade] rewrites format-6
// and format-7 blocks.
const blockMax = 48

// posting is one entry of a block.
type posting struct {
	id   string
	rank []byte // 16 bytes
	// tf and dl are the word's term frequency in the fact and the fact's
	// number of words; tf 0 when the posting does not carry them.
	tf, dl uint32
}

// rankLen is the length of a posting's rank prefix.
const rankLen = 16

// compactID returns the 16 bytes a standard fact id ("f_" and 32 lowercase
// hex digits) stands for.
func compactID(id string) (raw [16]byte, ok bool) {
	if len(id) != 34 || !strings.HasPrefix(id, "f_") {
		return raw, false
	}
	for i := range raw {
		hi, lo := lowerHex(id[2+2*i]), lowerHex(id[3+2*i])
		if hi > 0xf || lo > 0xf { // lowercase only, so it stands for id alone
			return [16]byte{}, false
		}
		raw[i] = hi<<4 | lo
	}
	return raw, true
}

// lowerHex is the value of the lowercase hexadecimal digit c, or 0xff
// when c is not one.
func lowerHex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}

// standardID is the standard fact id that the 16 bytes raw stand for:
// compactID's inverse.
func standardID(raw []byte) string {
	var hx [34]byte
	hx[0], hx[1] = 'f', '_'
	hex.Encode(hx[2:], raw[:16])
	return string(hx[:])
}

// Marks of a block: the first byte of a block in the layout of format 10
// (blockMark10), of formats 8 and 9 (blockMark) and of format 7
// (blockMark7).
const (
	blockMark10 = 0xfc
	blockMark   = 0xfd
	blockMark7  = 0xfe
)

// Layouts of a block, named by the format that introduced them: that of
// format 7, that of formats 8 and 9 (format 8 wrote no flagSeqID), and
// that of format 10.
const (
	layout7  = 7
	layout9  = 9
	layout10 = 10
)

// blockLayout is the layout of the block that starts with the byte mark,
// 0 when it is none of those of format 7 or later.
func blockLayout(mark byte) int {
	switch mark {
	case blockMark10:
		return layout10
	case blockMark:
		return layout9
	case blockMark7:
		return layout7
	}
	return 0
}

// markOf is the first byte of a block of layout.
func markOf(layout int) byte {
	switch layout {
	case layout10:
		return blockMark10
	case layout9:
		return blockMark
	}
	return blockMark7
}

// Flags of a posting of a block of format 7 or 8 (flagConfPct: format 8
// only).
const (
	flagStdID    = 1 << 0
	flagSameConf = 1 << 1
	flagConfPct  = 1 << 2
	flagSeqID    = 1 << 3 // format 9: a standard id a little past the previous one (see seqDistance)
	flagTF       = 7 << 4 // format 10: the term frequency, 1 to 6, or 7 for 7 and more; 0 for none
)

// tfShift is the position of flagTF's bits.
const tfShift = 4

// tfMax is the greatest term frequency and dl a posting carries: those of
// a fact of more words are cut to it.
const tfMax = 1 << 30

// seqMax bounds the distance from the previous id that a posting writes
// under flagSeqID.
const seqMax = 1 << 32

// seqDistance returns how far past the standard id prev the standard id
// raw is, when both are of the same millisecond and it is 1 to seqMax:
// their last 8 bytes differ by it and the 2 before are equal.
func seqDistance(prev, raw []byte) (uint64, bool) {
	if string(prev[:8]) != string(raw[:8]) {
		return 0, false
	}
	d := binary.BigEndian.Uint64(raw[8:]) - binary.BigEndian.Uint64(prev[8:])
	return d, d >= 1 && d <= seqMax
}

// confPct returns k when the 8 bytes of ^confidence c stand for k/100, k
// a whole number from 0 to 100.
func confPct(c []byte) (byte, bool) {
	f := math.Float64frombits(^binary.BigEndian.Uint64(c))
	k := math.Round(f * 100)
	if k < 0 || k > 100 || float64(k)/100 != f || math.Signbit(f) {
		return 0, false
	}
	return byte(k), true
}

// idMs is the millisecond of a time-ordered standard id, its first 6 of
// 16 bytes.
func idMs(raw []byte) uint64 {
	return uint64(raw[0])<<40 | uint64(raw[1])<<32 | uint64(raw[2])<<24 | uint64(raw[3])<<16 | uint64(raw[4])<<8 | uint64(raw[5])
}

// msAt is the ^stored_at of the start of millisecond ms: a block of format
// 8 whose first id is standard counts the first ^stored_at from it.
func msAt(ms uint64) uint64 { return ^(ms * 1e6) }

// encodeBlock encodes postings, sorted by id, in the layout of format 10.
func encodeBlock(ps []posting) []byte {
	return encodeBlockLayout(ps, layout10)
}

// encodeBlockLayout encodes postings, sorted by id, in layout (layout7,
// layout9 or layout10).
func encodeBlockLayout(ps []posting, layout int) []byte {
	b := make([]byte, 0, 1+len(ps)*20)
	b = append(b, markOf(layout))
	var st blockState
	for _, p := range ps {
		b = st.appendPosting(b, p, layout)
	}
	return b
}

// blockState is what the encoding of a posting of a block of format 7 or
// later depends on: the postings before it, as far as the encoder and the
// decoder remember them.
type blockState struct {
	n      int    // postings so far
	prevMs uint64 // the millisecond of the last standard id
	prevAt uint64 // the last posting's ^stored_at
	raw    [16]byte
	std    bool    // the last posting's id is standard: raw
	conf   [8]byte // the last posting's ^confidence
}

// appendPosting appends to b the encoding of p after the postings st
// stands for, in layout, and moves st past p.
func (st *blockState) appendPosting(b []byte, p posting, layout int) []byte {
	v8 := layout >= layout9
	raw, std := compactID(p.id)
	flags := byte(0)
	seq, isSeq := uint64(0), false
	if std && v8 && st.std {
		seq, isSeq = seqDistance(st.raw[:], raw[:])
	}
	switch {
	case isSeq:
		flags |= flagSeqID
	case std:
		flags |= flagStdID
	}
	same := st.n > 0 && string(p.rank[:8]) == string(st.conf[:])
	pct, isPct := confPct(p.rank[:8])
	switch {
	case same:
		flags |= flagSameConf
	case isPct && v8:
		flags |= flagConfPct
	}
	counted := layout >= layout10 && p.tf > 0
	if counted {
		flags |= byte(min(p.tf, 7)) << tfShift
	}
	b = append(b, flags)
	switch {
	case isSeq:
		b = binary.AppendUvarint(b, seq)
	case std:
		ms := idMs(raw[:])
		if st.n == 0 && v8 {
			st.prevAt = msAt(ms)
		}
		b = binary.AppendVarint(b, int64(ms-st.prevMs))
		b = append(b, raw[6:]...)
		st.prevMs = ms
	default:
		b = binary.AppendUvarint(b, uint64(len(p.id)))
		b = append(b, p.id...)
	}
	if std {
		st.raw = raw
	}
	st.std = std
	switch {
	case same:
	case isPct && v8:
		b = append(b, pct)
	default:
		b = append(b, p.rank[:8]...)
	}
	copy(st.conf[:], p.rank[:8])
	at := binary.BigEndian.Uint64(p.rank[8:16])
	b = binary.AppendVarint(b, int64(at-st.prevAt))
	if counted {
		tf := min(p.tf, tfMax)
		if tf >= 7 {
			b = binary.AppendUvarint(b, uint64(tf-7))
		}
		b = binary.AppendUvarint(b, uint64(min(p.dl, tfMax)))
	}
	st.prevAt = at
	st.n++
	return b
}

var errBadBlock = errors.New("store: malformed keyword posting block")

// decodeBlock decodes a block of either layout; the postings share no
// memory with v.
func decodeBlock(v []byte) ([]posting, error) {
	ps, _, err := decodeBlockLayout(v)
	return ps, err
}

// decodeBlockLayout is decodeBlock, also reporting whether v is in the
// layout of format 10.
func decodeBlockLayout(v []byte) (ps []posting, current bool, err error) {
	if len(v) > 0 && blockLayout(v[0]) != 0 {
		if ps, err := decodeBlock7(v[1:], blockLayout(v[0])); err == nil {
			return ps, v[0] == blockMark10, nil
		}
	}
	ps, err = decodeBlock6(v)
	return ps, false, err
}

// blockReader reads the postings of a block of format 7 or later, after
// its mark, one at a time and without allocating.
type blockReader struct {
	v      []byte // what is left to read
	v8     bool   // the block is of format 8 or later
	layout int    // the block's layout (v8: layout9 or later)
	blockState
	id []byte // the last posting's id when it is not standard (else raw)
	// tf and dl are the last posting's counts, tf 0 when it has none.
	tf, dl uint32
	// canonical, when set from the start (in a block of format 8 or
	// later), stays set while every posting read is as appendPosting
	// writes it in the block's layout (an id of 34 bytes that is not
	// standard counts as not).
	canonical bool
}

// newBlockReader is the reader of the block v of layout 7 or later, its
// mark included.
func newBlockReader(v []byte) blockReader {
	l := blockLayout(v[0])
	return blockReader{v: v[1:], v8: l >= layout9, layout: l}
}

// minimalVarint reports whether the varint v of n bytes (n > 0), as
// binary.Varint and binary.Uvarint read it, is as short as they write it.
func minimalVarint(v []byte, n int) bool { return n == 1 || v[n-1] != 0 }

// next reads the next posting; r.v must not be empty.
func (r *blockReader) next() error {
	allowed := byte(flagStdID | flagSameConf)
	if r.v8 {
		allowed |= flagConfPct | flagSeqID
	}
	if r.layout >= layout10 {
		allowed |= flagTF
	}
	v := r.v
	flags := v[0]
	v = v[1:]
	if flags&^allowed != 0 || flags&(flagSameConf|flagConfPct) == flagSameConf|flagConfPct ||
		flags&(flagStdID|flagSeqID) == flagStdID|flagSeqID {
		return errBadBlock
	}
	canonical := r.canonical
	switch {
	case flags&flagSeqID != 0:
		d, n := binary.Uvarint(v)
		lo := binary.BigEndian.Uint64(r.raw[8:])
		if n <= 0 || !r.std || d < 1 || d > seqMax || lo+d < lo {
			return errBadBlock
		}
		canonical = canonical && minimalVarint(v, n)
		binary.BigEndian.PutUint64(r.raw[8:], lo+d)
		v = v[n:]
	case flags&flagStdID != 0:
		d, n := binary.Varint(v)
		if n <= 0 || len(v) < n+10 {
			return errBadBlock
		}
		ms := r.prevMs + uint64(d)
		if ms >= 1<<48 {
			return errBadBlock
		}
		if r.n == 0 && r.v8 {
			r.prevAt = msAt(ms)
		}
		r.prevMs = ms
		var raw [16]byte
		raw[0], raw[1], raw[2], raw[3], raw[4], raw[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
		copy(raw[6:], v[n:n+10])
		if canonical && r.std {
			_, seq := seqDistance(r.raw[:], raw[:])
			canonical = !seq // else flagSeqID would do
		}
		canonical = canonical && minimalVarint(v, n)
		r.raw = raw
		v = v[n+10:]
	default:
		l, n := binary.Uvarint(v)
		if n <= 0 || l == 0 || l > postingIDMax || uint64(len(v)-n) < l {
			return errBadBlock
		}
		canonical = canonical && minimalVarint(v, n) && l != 34
		r.id, v = v[n:n+int(l)], v[n+int(l):]
	}
	r.std = flags&(flagStdID|flagSeqID) != 0
	conf := r.conf
	switch {
	case flags&flagSameConf != 0:
		if r.n == 0 {
			return errBadBlock
		}
	case flags&flagConfPct != 0:
		if len(v) < 1 || v[0] > 100 {
			return errBadBlock
		}
		binary.BigEndian.PutUint64(r.conf[:], ^math.Float64bits(float64(v[0])/100))
		v = v[1:]
	default:
		if len(v) < 8 {
			return errBadBlock
		}
		copy(r.conf[:], v[:8])
		v = v[8:]
		if canonical {
			_, pct := confPct(r.conf[:])
			canonical = !pct // else flagConfPct would do
		}
	}
	if canonical && flags&flagSameConf == 0 && r.n > 0 && conf == r.conf {
		canonical = false // flagSameConf would do
	}
	d, n := binary.Varint(v)
	if n <= 0 {
		return errBadBlock
	}
	canonical = canonical && minimalVarint(v, n)
	v = v[n:]
	r.tf, r.dl = 0, 0
	if tf := uint64(flags&flagTF) >> tfShift; tf > 0 {
		if tf == 7 {
			x, n := binary.Uvarint(v)
			if n <= 0 || x > tfMax-7 {
				return errBadBlock
			}
			canonical = canonical && minimalVarint(v, n)
			tf, v = 7+x, v[n:]
		}
		dl, n := binary.Uvarint(v)
		if n <= 0 || dl > tfMax {
			return errBadBlock
		}
		canonical = canonical && minimalVarint(v, n)
		r.tf, r.dl, v = uint32(tf), uint32(dl), v[n:]
	}
	r.canonical = canonical
	r.v = v
	r.prevAt += uint64(d)
	r.n++
	return nil
}

// decodeBlock7 decodes the postings of a block of layout (layout7 or
// later), after its mark.
func decodeBlock7(v []byte, layout int) ([]posting, error) {
	ps := make([]posting, 0, len(v)/15)
	var ranks []byte // the postings' ranks are cut from it, a few at a time
	r := blockReader{v: v, v8: layout >= layout9, layout: layout}
	for len(r.v) > 0 {
		if err := r.next(); err != nil {
			return nil, err
		}
		var id string
		if r.std {
			id = standardID(r.raw[:])
		} else {
			id = string(r.id)
		}
		if len(ranks) < rankLen {
			ranks = make([]byte, rankLen*max(8, len(r.v)/13+1))
		}
		rank := ranks[:rankLen:rankLen]
		ranks = ranks[rankLen:]
		copy(rank, r.conf[:])
		binary.BigEndian.PutUint64(rank[8:], r.prevAt)
		ps = append(ps, posting{id: id, rank: rank, tf: r.tf, dl: r.dl})
	}
	if len(ps) == 0 {
		return nil, errBadBlock
	}
	return ps, nil
}

// appendTail appends ps, sorted by id, to v, a block of the layout of
// format 10 and of at most blockMax postings, when they all sort after its
// postings: as many as fit in it. It returns the block, the bytes
// encodeBlock writes for the postings of v and then those of ps taken,
// though v is read without decoding it, with its last id when it is full
// and some of ps are left (rest). b is nil when that cannot be done (v is
// of another layout, or not as encodeBlock writes it, or ps do not sort
// after it).
func appendTail(v []byte, ps []posting) (b []byte, last string, rest []posting) {
	if len(v) == 0 || v[0] != blockMark10 {
		return nil, "", nil
	}
	r := blockReader{v: v[1:], v8: true, layout: layout10, canonical: true}
	for len(r.v) > 0 {
		if r.next() != nil || !r.canonical {
			return nil, "", nil
		}
	}
	if r.n == 0 || r.n > blockMax {
		return nil, "", nil
	}
	var hx [34]byte
	lastID := r.id
	if r.std {
		hx[0], hx[1] = 'f', '_'
		hex.Encode(hx[2:], r.raw[:])
		lastID = hx[:]
	}
	if ps[0].id <= string(lastID) {
		return nil, "", nil
	}
	ps, rest = ps[:min(len(ps), blockMax-r.n)], ps[min(len(ps), blockMax-r.n):]
	b = make([]byte, len(v), len(v)+len(ps)*18)
	copy(b, v)
	for _, p := range ps {
		b = r.appendPosting(b, p, layout10)
	}
	switch {
	case len(rest) == 0:
	case len(ps) > 0:
		last = ps[len(ps)-1].id
	default:
		last = string(lastID)
	}
	return b, last, rest
}

// decodeBlock6 decodes a block in the layout of format 6.
func decodeBlock6(v []byte) ([]posting, error) {
	var ps []posting
	for len(v) > 0 {
		n := int(v[0])
		v = v[1:]
		var id string
		if n == 0 {
			if len(v) < 16 {
				return nil, errBadBlock
			}
			id, v = standardID(v[:16]), v[16:]
		} else {
			if len(v) < n {
				return nil, errBadBlock
			}
			id, v = string(v[:n]), v[n:]
		}
		if len(v) < rankLen {
			return nil, errBadBlock
		}
		ps = append(ps, posting{id: id, rank: bytes.Clone(v[:rankLen])})
		v = v[rankLen:]
	}
	if len(ps) == 0 {
		return nil, errBadBlock
	}
	return ps, nil
}

// upgradeBlocks rewrites, in the layout of format 10, every block of the
// keyword index still in that of format 6 or 7. A block that decodes in
// none is left for crux doctor.
func upgradeBlocks(tx Tx) error {
	type entry struct{ k, v []byte }
	var todo []entry
	if err := tx.Scan(bucketWords, nil, false, func(k, v []byte) error {
		ps, current, err := decodeBlockLayout(v)
		if current || err != nil {
			return nil
		}
		todo = append(todo, entry{bytes.Clone(k), encodeBlock(ps)})
		return nil
	}); err != nil {
		return err
	}
	for _, e := range todo {
		if err := tx.Put(bucketWords, e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

// upgradeTails moves the last block of every word that has no tail block
// (as in format 7, where every block is under its last id) to the word's
// tail key. A last block that does not decode is left for crux doctor.
func upgradeTails(tx Tx) error {
	type entry struct{ from, to, v []byte }
	var todo []entry
	var last entry // the last block seen of the current word
	flush := func() {
		if last.from != nil && !isTailKey(last.from) {
			if _, err := decodeBlock(last.v); err == nil {
				todo = append(todo, last)
			}
		}
	}
	if err := tx.Scan(bucketWords, nil, false, func(k, v []byte) error {
		tenant, word, _, ok := parseBlockKey(k)
		if !ok {
			return nil
		}
		to := tailKey(tenant, word)
		if last.from != nil && !bytes.Equal(to, last.to) {
			flush()
		}
		last = entry{bytes.Clone(k), to, bytes.Clone(v)}
		return nil
	}); err != nil {
		return err
	}
	flush()
	for _, e := range todo {
		if err := tx.Delete(bucketWords, e.from); err != nil {
			return err
		}
		if err := tx.Put(bucketWords, e.to, e.v); err != nil {
			return err
		}
	}
	return nil
}

// postingID is the longest fact id a block holds: its length is one byte.
const postingIDMax = 255

// wordPrefix is the key prefix of the blocks of word in tenant.
func wordPrefix(tenant, word string) []byte { return indexKey(tenant, word, "") }

// tailMark ends the key of a word's tail block in place of a fact id: the
// byte 0xff, which no fact id (valid UTF-8) holds, so the key sorts after
// those of the word's other blocks, as the tail's ids do.
const tailMark = "\xff"

// tailKey is the key of the tail block of word in tenant.
func tailKey(tenant, word string) []byte { return indexKey(tenant, word, tailMark) }

// parseBlockKey splits a block key into tenant, word and last id; the last
// id of a tail block is tailMark.
func parseBlockKey(k []byte) (tenant, word, last string, ok bool) {
	t, rest, ok1 := bytes.Cut(k, []byte{0})
	w, l, ok2 := bytes.Cut(rest, []byte{0})
	if !ok1 || !ok2 || len(w) == 0 || len(l) == 0 {
		return "", "", "", false
	}
	return string(t), string(w), string(l), true
}

// isTailKey reports whether the block key k is that of a tail block.
func isTailKey(k []byte) bool {
	_, _, last, ok := parseBlockKey(k)
	return ok && last == tailMark
}

// block is a block read from the index.
type block struct {
	key  []byte
	ps   []posting
	tail bool // key is the word's tail key
}

// findBlock returns the block of word where id belongs: the one with the
// smallest last id at or above id, or else the word's tail block, or else
// its last block; nil when the word has no block. Blocks that do not
// decode are passed over (crux doctor reports them); tailTaken reports
// whether the word's tail key holds one.
func findBlock(tx Tx, tenant, word, id string) (found *block, tailTaken bool, err error) {
	prefix := wordPrefix(tenant, word)
	visit := func(k, v []byte) error {
		tail := isTailKey(k)
		tailTaken = tailTaken || tail
		ps, err := decodeBlock(v)
		if err != nil {
			return nil
		}
		found = &block{key: bytes.Clone(k), ps: ps, tail: tail}
		return ErrStop
	}
	if err := scanFrom(tx, bucketWords, prefix, append(bytes.Clone(prefix), id...), visit); err != nil || found != nil {
		return found, tailTaken, err
	}
	err = tx.Scan(bucketWords, prefix, true, visit) // id is past every block: the last one
	return found, tailTaken, err
}

// putBlocks writes ps (sorted by id) as blocks of at most blockMax
// postings, each under its last id; when tail is set, the last of them is
// the word's tail block, under its tail key, and the others are full.
func putBlocks(tx Tx, tenant, word string, ps []posting, tail bool) error {
	hintAppend(tx, bucketWords)
	for len(ps) > 0 {
		n := min(len(ps), blockMax)
		var key []byte
		if tail && len(ps) <= blockMax {
			key = tailKey(tenant, word)
		} else {
			// Postings are appended to a tail, so full blocks before it
			// stay full; without one, two half blocks rather than a full
			// one and a sliver.
			if !tail && len(ps) > blockMax && len(ps) < 2*blockMax {
				n = len(ps) / 2
			}
			key = indexKey(tenant, word, ps[n-1].id)
		}
		if err := tx.Put(bucketWords, key, encodeBlock(ps[:n])); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// replaceBlock removes b from the index and writes ps in its place (see
// putBlocks for tail). A tail block rewritten as the tail keeps its key.
func replaceBlock(tx Tx, tenant, word string, b *block, ps []posting, tail bool) error {
	if b != nil && !(b.tail && tail && len(ps) > 0) {
		if err := tx.Delete(bucketWords, b.key); err != nil {
			return err
		}
	}
	return putBlocks(tx, tenant, word, ps, tail)
}

// addPostings adds the postings ps of word in tenant, sorted by id and
// distinct. New facts' ids sort after every id in the index, so they
// usually all join the word's last block, and blocks after it.
func addPostings(tx Tx, tenant, word string, ps []posting) error {
	for _, p := range ps {
		if len(p.id) > postingIDMax {
			return fmt.Errorf("store: fact id %.40q... is longer than %d bytes", p.id, postingIDMax)
		}
		if strings.HasPrefix(p.id, tailMark) {
			return fmt.Errorf("store: fact id %.40q is not valid UTF-8", p.id)
		}
	}
	if done, err := appendToTail(tx, tenant, word, ps); done || err != nil {
		return err
	}
	for len(ps) > 0 {
		b, tailTaken, err := findBlock(tx, tenant, word, ps[0].id)
		if err != nil {
			return err
		}
		if b == nil {
			return putBlocks(tx, tenant, word, ps, !tailTaken)
		}
		last := b.ps[len(b.ps)-1].id
		if ps[0].id > last {
			// Past the word's last block: all of ps joins it, which is
			// (or becomes, unless a block that does not decode holds the
			// key) the word's tail.
			return replaceBlock(tx, tenant, word, b, append(b.ps, ps...), b.tail || !tailTaken)
		}
		// Into the block's range: the postings up to its last id.
		n := 1
		for n < len(ps) && ps[n].id <= last {
			n++
		}
		merged := make([]posting, 0, len(b.ps)+n)
		merged = append(merged, b.ps...)
		for _, p := range ps[:n] {
			i, found := slices.BinarySearchFunc(merged, p.id, func(q posting, id string) int { return strings.Compare(q.id, id) })
			if found {
				merged[i] = p
			} else {
				merged = slices.Insert(merged, i, p)
			}
		}
		if err := replaceBlock(tx, tenant, word, b, merged, b.tail); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// appendToTail adds the postings ps of word in tenant, as addPostings
// does, when they all join the word's tail block and appendTail can add
// them to it: when findBlock would find the tail block, and addPostings
// write it again with them at its end, or, when they do not all fit, the
// full block of its postings and the first of ps under its last id, and
// the rest of ps after it. It reports whether it did.
func appendToTail(tx Tx, tenant, word string, ps []posting) (bool, error) {
	if len(ps) == 0 {
		return false, nil
	}
	key := tailKey(tenant, word)
	prefix := key[:len(key)-len(tailMark)]
	var v []byte
	var last string
	var rest []posting
	err := scanFrom(tx, bucketWords, prefix, append(bytes.Clone(prefix), ps[0].id...), func(k, b []byte) error {
		if bytes.Equal(k, key) {
			v, last, rest = appendTail(b, ps)
		}
		return ErrStop
	})
	if err != nil || v == nil {
		return false, err
	}
	hintAppend(tx, bucketWords)
	if len(rest) == 0 {
		return true, tx.Put(bucketWords, key, v)
	}
	if err := tx.Put(bucketWords, indexKey(tenant, word, last), v); err != nil {
		return true, err
	}
	return true, putBlocks(tx, tenant, word, rest, true)
}

// removePosting removes the posting of the fact id from the blocks of word
// in tenant. A missing posting is not an error.
func removePosting(tx Tx, tenant, word, id string) error {
	b, _, err := findBlock(tx, tenant, word, id)
	if err != nil || b == nil {
		return err
	}
	i, found := slices.BinarySearchFunc(b.ps, id, func(q posting, id string) int { return strings.Compare(q.id, id) })
	if !found {
		return nil
	}
	return replaceBlock(tx, tenant, word, b, slices.Delete(b.ps, i, i+1), b.tail)
}
