package bench

// The write-path figures: pages a lone store_fact commit writes, file bytes
// per fact, and CPU per durable write. This file uses only names that older
// versions of the bench package also have, so bench/writepath.sh can run it
// against an older commit and against this one in the same run and report
// ratios.

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
)

// pageSize is the page size bbolt uses for new files here: the OS page size.
var pageSize = os.Getpagesize()

// changedPages counts the pages of after that differ from before, a page
// past the end of before counting when it is not all zeros. bbolt writes
// whole pages with pwrite, so this is the number of pages a commit wrote,
// less any page rewritten with identical bytes.
func changedPages(before, after []byte) int {
	n := 0
	zero := make([]byte, pageSize)
	for off := 0; off < len(after); off += pageSize {
		end := min(off+pageSize, len(after))
		a := after[off:end]
		if off < len(before) {
			if !bytes.Equal(a, before[off:min(end, len(before))]) {
				n++
			}
		} else if !bytes.Equal(a, zero[:len(a)]) {
			n++
		}
	}
	return n
}

func readFile(b *testing.B, path string) []byte {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// short is n, or under -short a fiftieth of it (at least 200), as the
// other benchmarks of the package do; it is this file's own, since older
// versions of the package do not have theirs.
func short(n int) int {
	if testing.Short() {
		return max(200, n/50)
	}
	return n
}

// fill writes n facts with storeArgs through a server on path, fsync off.
func fill(b *testing.B, path string, n int) {
	b.Helper()
	fillWith(b, path, n, &bolt.Options{NoSync: true})
}

// fillWith is fill with the store opened with opts.
func fillWith(b *testing.B, path string, n int, opts *bolt.Options) {
	b.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		mustCall(b, srv, "store_fact", storeArgs(i))
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWritePathPagesPerCommit reports how many pages one lone durable
// store_fact commit writes into a store of 10,000 facts (pages/commit, the
// median over the commits run; mean-pages/commit, their mean, which counts
// the commits that move staged entries into their indexes too), found by
// comparing the file before and after each call.
func BenchmarkWritePathPagesPerCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "crux.db")
	start := short(10_000)
	fill(b, path, start)
	srv := newServer(b, path, nil)
	var pages []int
	i := start
	for b.Loop() {
		before := readFile(b, path)
		mustCall(b, srv, "store_fact", storeArgs(i))
		pages = append(pages, changedPages(before, readFile(b, path)))
		i++
	}
	sort.Ints(pages)
	b.ReportMetric(float64(pages[len(pages)/2]), "pages/commit")
	sum := 0
	for _, n := range pages {
		sum += n
	}
	b.ReportMetric(float64(sum)/float64(len(pages)), "mean-pages/commit")
}

// BenchmarkWritePathFileBytes reports the database file's size per fact
// after 50,000 store_fact calls from one caller (B/fact), and the size of
// its pages in use (used-B/fact, see usedBytes), with fsync off, which also
// turns the write-ahead log off (see BenchmarkWritePathFileBytesDurable).
func BenchmarkWritePathFileBytes(b *testing.B) {
	n := short(50_000)
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "crux.db")
		fill(b, path, n)
		reportFileBytes(b, path, n)
	}
}

// BenchmarkWritePathFileBytesDurable is BenchmarkWritePathFileBytes with
// every call durable, as shipped: the write-ahead log's checkpoints keep
// the pages of their state from reuse for a while, which the file may grow
// by.
func BenchmarkWritePathFileBytesDurable(b *testing.B) {
	n := short(50_000)
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "crux.db")
		fillWith(b, path, n, nil)
		reportFileBytes(b, path, n)
	}
}

// reportFileBytes reports the size of the database file at path, holding
// n facts, per fact.
func reportFileBytes(b *testing.B, path string, n int) {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/float64(n), "B/fact")
	b.ReportMetric(float64(usedBytes(b, path))/float64(n), "used-B/fact")
}

// usedBytes is the size of the pages of the bbolt file at path up to its
// high-water mark, without the preallocated space at its end (bbolt grows
// the file 16 MiB at a time).
func usedBytes(b *testing.B, path string) int64 {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var size int64
	if err := db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		b.Fatal(err)
	}
	return size
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWritePathCPU reports the process CPU time per durable
// store_fact from one caller (cpu-µs/op), in a store that starts with
// 2,000 facts.
func BenchmarkWritePathCPU(b *testing.B) {
	path := filepath.Join(b.TempDir(), "crux.db")
	fill(b, path, 2_000)
	srv := newServer(b, path, nil)
	i := 2_000
	start := cpuTime(b)
	for b.Loop() {
		mustCall(b, srv, "store_fact", storeArgs(i))
		i++
	}
	b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(i-2_000), "cpu-µs/op")
}
