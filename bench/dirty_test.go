package bench

// Which buckets' pages a lone commit writes: the file is read as bbolt lays
// it out (a 16-byte page header: id, flags, count, overflow; branch
// elements of 16 bytes: pos, ksize, pgid; leaf elements of 16 bytes: flags,
// pos, ksize, vsize; a bucket value starting with its root page id, 0 for
// an inline bucket; the meta page's root bucket at offset 16 of its body
// and its txid at 48).

import (
	"encoding/binary"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// pageOwners maps each page id reachable from the meta page of the bbolt
// file data to the bucket path that owns it ("" the root bucket).
func pageOwners(data []byte) map[uint64]string {
	ps := pageSize
	meta := func(i int) (root, txid uint64) {
		p := data[i*ps:]
		m := p[16:]
		return binary.LittleEndian.Uint64(m[16:]), binary.LittleEndian.Uint64(m[48:])
	}
	r0, t0 := meta(0)
	r1, t1 := meta(1)
	root := r0
	if t1 > t0 {
		root = r1
	}
	own := map[uint64]string{}
	var walk func(pg uint64, name string)
	walkLeaf := func(p []byte, name string) {
		count := int(binary.LittleEndian.Uint16(p[10:]))
		for i := range count {
			e := p[16+i*16:]
			flags := binary.LittleEndian.Uint32(e)
			pos := int(binary.LittleEndian.Uint32(e[4:]))
			ks := int(binary.LittleEndian.Uint32(e[8:]))
			vs := int(binary.LittleEndian.Uint32(e[12:]))
			if flags&1 == 0 {
				continue
			}
			base := 16 + i*16 + pos
			k := string(p[base : base+ks])
			v := p[base+ks : base+ks+vs]
			sub := binary.LittleEndian.Uint64(v)
			if sub != 0 {
				walk(sub, name+"/"+k)
			}
		}
	}
	walk = func(pg uint64, name string) {
		p := data[int(pg)*ps:]
		flags := binary.LittleEndian.Uint16(p[8:])
		overflow := binary.LittleEndian.Uint32(p[12:])
		for j := uint64(0); j <= uint64(overflow); j++ {
			own[pg+j] = name
		}
		count := int(binary.LittleEndian.Uint16(p[10:]))
		switch {
		case flags&1 != 0: // branch
			for i := range count {
				e := p[16+i*16:]
				walk(binary.LittleEndian.Uint64(e[8:]), name)
			}
		case flags&2 != 0:
			walkLeaf(p, name)
		}
	}
	walk(root, "")
	return own
}

// BenchmarkWritePathDirtyPages reports, for one lone durable store_fact
// commit into a store of 10,000 facts, the mean number of pages it writes
// in each bucket ("pages-<bucket>/commit"; "root" is the bucket of buckets,
// "meta" the meta page), found by comparing the file before and after each
// call and walking the B+trees of the file after it.
func BenchmarkWritePathDirtyPages(b *testing.B) {
	path := filepath.Join(b.TempDir(), "crux.db")
	start := scaled(10_000)
	fill(b, path, start)
	srv := newServer(b, path, nil)
	i := start
	tally := map[string]int{}
	n := 0
	for b.Loop() {
		before := readFile(b, path)
		mustCall(b, srv, "store_fact", storeArgs(i))
		after := readFile(b, path)
		own := pageOwners(after)
		for off := 0; off < len(after); off += pageSize {
			pg := uint64(off / pageSize)
			end := min(off+pageSize, len(after))
			changed := false
			if off < len(before) {
				changed = string(after[off:end]) != string(before[off:min(end, len(before))])
			} else {
				changed = strings.Trim(string(after[off:end]), "\x00") != ""
			}
			if !changed {
				continue
			}
			name, ok := own[pg]
			if !ok {
				if pg < 2 {
					name = "meta"
				} else {
					name = "?unreachable"
				}
			}
			tally[name]++
		}
		n++
		i++
	}
	var names []string
	for k := range tally {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		name := strings.TrimPrefix(k, "/")
		if name == "" {
			name = "root"
		}
		b.ReportMetric(float64(tally[k])/float64(n), "pages-"+name+"/commit")
	}
}

// BenchmarkWritePathBucketBytes reports, after 50,000 store_fact calls from
// one caller, the bytes per fact each bucket holds in use
// ("B-<bucket>/fact": keys, values and element headers of its leaves and
// branches) and allocates ("alloc-B-<bucket>/fact": its pages), as bbolt's
// bucket statistics count them. fsync is off.
func BenchmarkWritePathBucketBytes(b *testing.B) {
	n := scaled(50_000)
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "crux.db")
		fill(b, path, n)
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		err = db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
				s := bk.Stats()
				inuse := s.LeafInuse + s.BranchInuse + s.InlineBucketInuse
				alloc := s.LeafAlloc + s.BranchAlloc
				b.ReportMetric(float64(inuse)/float64(n), "B-"+string(name)+"/fact")
				b.ReportMetric(float64(alloc)/float64(n), "alloc-B-"+string(name)+"/fact")
				return nil
			})
		})
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}
