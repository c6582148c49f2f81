package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// Tests of the write-ahead log, one mechanism each. A "kill copy" copies
// the database file and its log byte for byte while the DB is open and no
// Update runs: what a process kill leaves behind, every write() having
// reached the page cache.

// copyFile copies src to dst byte for byte.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o600))
}

// killCopy copies the database at path and its log into a fresh directory
// and returns the copy's path. No Update may run meanwhile.
func killCopy(t testing.TB, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "crux.db")
	copyFile(t, path, dst)
	copyFile(t, path+walSuffix, dst+walSuffix)
	return dst
}

// contents returns every bucket of bdb with its entries, the stages
// included.
func contents(t testing.TB, bdb *bbolt.DB) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	require.NoError(t, bdb.View(func(btx *bbolt.Tx) error {
		return btx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			m := map[string]string{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error {
				m[string(k)] = string(v)
				return nil
			})
		})
	}))
	return out
}

// checkBolt runs bbolt's consistency check on bdb.
func checkBolt(t testing.TB, bdb *bbolt.DB) {
	t.Helper()
	require.NoError(t, bdb.View(func(btx *bbolt.Tx) error {
		for err := range btx.Check() {
			return err
		}
		return nil
	}))
}

// openChecked opens the database at path, runs bbolt's consistency check
// on it and closes it at cleanup.
func openChecked(t testing.TB, path string, opts *Options) *DB {
	t.Helper()
	db, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	checkBolt(t, db.bdb)
	return db
}

// walModel is what the Updates that returned nil wrote: the live entries,
// and the keys deleted since.
type walModel struct {
	mu   sync.Mutex
	live map[[2]string]string
	gone map[[2]string]bool
}

func newWALModel() *walModel {
	return &walModel{live: map[[2]string]string{}, gone: map[[2]string]bool{}}
}

func (m *walModel) put(bucket, key, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[[2]string{bucket, key}] = value
	delete(m.gone, [2]string{bucket, key})
}

func (m *walModel) del(bucket, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.live, [2]string{bucket, key})
	m.gone[[2]string{bucket, key}] = true
}

// clone returns a copy of m.
func (m *walModel) clone() *walModel {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newWALModel()
	maps.Copy(c.live, m.live)
	maps.Copy(c.gone, m.gone)
	return c
}

// check asserts that db holds every live entry of m and none of its
// deleted keys.
func (m *walModel) check(t testing.TB, db store.Backend) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotEmpty(t, m.live)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for bk, want := range m.live {
			v, err := tx.Get(bk[0], []byte(bk[1]))
			if !assert.NoError(t, err, "%q in %q", bk[1], bk[0]) {
				continue
			}
			assert.Equal(t, want, string(v), "%q in %q", bk[1], bk[0])
		}
		for bk := range m.gone {
			_, err := tx.Get(bk[0], []byte(bk[1]))
			assert.ErrorIs(t, err, store.ErrNotFound, "deleted %q in %q", bk[1], bk[0])
		}
		return nil
	}))
}

// stagedBucket is a bucket whose writes go to a stage first.
var stagedBucket = store.StagedIndexes()[0]

// workload runs writers goroutines side by side, each making rounds
// Updates: round r puts key r into "b" and into the staged bucket,
// overwrites key r-1 in both, and every third round deletes key r-2 from
// both. Values are about 100 bytes, so the stage fills and moves into its
// bucket now and then. m records what each Update that returned wrote.
func workload(t testing.TB, db *DB, m *walModel, tag string, writers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := func(r int) string { return fmt.Sprintf("%s-w%02d-r%03d", tag, w, r) }
			pad := strings.Repeat("x", 80)
			for r := range rounds {
				v1 := fmt.Sprintf("first %s %s", key(r), pad)
				v2 := fmt.Sprintf("second %s %s", key(r-1), pad)
				del := r >= 2 && r%3 == 0
				err := db.Update(context.Background(), func(tx store.Tx) error {
					for _, b := range []string{"b", stagedBucket} {
						if err := tx.Put(b, []byte(key(r)), []byte(v1)); err != nil {
							return err
						}
						if r > 0 {
							if err := tx.Put(b, []byte(key(r-1)), []byte(v2)); err != nil {
								return err
							}
						}
						if del {
							if err := tx.Delete(b, []byte(key(r-2))); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if !assert.NoError(t, err) {
					return
				}
				for _, b := range []string{"b", stagedBucket} {
					m.put(b, key(r), v1)
					if r > 0 {
						m.put(b, key(r-1), v2)
					}
					if del {
						m.del(b, key(r-2))
					}
				}
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
}

// requireStageMoved fails unless the staged bucket itself holds entries:
// its stage was moved into it at least once.
func requireStageMoved(t testing.TB, bdb *bbolt.DB) {
	t.Helper()
	require.NoError(t, bdb.View(func(btx *bbolt.Tx) error {
		b := btx.Bucket([]byte(stagedBucket))
		require.NotNil(t, b, "the stage was never moved into its bucket")
		require.Positive(t, b.Stats().KeyN, "the stage was never moved into its bucket")
		return nil
	}))
}

// checkpointCopy opens a fresh database with a hook that copies its file
// as Open's checkpoint left it (flushed, the state the log starts from),
// runs a workload, and copies the log beside that copy while the DB is
// still open: the copy's file lacks every write, its log holds them all.
// It returns the copy's path; m records the writes.
func checkpointCopy(t testing.TB, m *walModel) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crux.db")
	dst := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, &Options{hooks: &hooks{pinRelease: time.Hour, afterCheckpoint: func() { copyFile(t, path, dst) }}})
	require.NoError(t, err)
	workload(t, db, m, "cc", 4, 12)
	require.EqualValues(t, 1, db.Stats().Checkpoints, "a checkpoint after Open's: the copy would not be of the state the log starts from")
	copyFile(t, path+walSuffix, dst+walSuffix)
	require.NoError(t, db.Close())
	return dst
}

// TestWALKillRecovery: a database copied while open, as a process kill
// leaves it, opens with every write whose Update returned, none of the
// deleted keys, and bbolt's check passing; a copy of the file as it was at
// Open's checkpoint, with the log as it is at the kill, recovers the same
// state, which there can only come from replaying the log.
func TestWALKillRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	m := newWALModel()

	// A first session leaves data in the file.
	db, err := Open(path, nil)
	require.NoError(t, err)
	workload(t, db, m, "pre", 1, 10)
	require.NoError(t, db.Close())

	ckpt := filepath.Join(t.TempDir(), "crux.db")
	db, err = Open(path, &Options{hooks: &hooks{pinRelease: time.Hour, afterCheckpoint: func() { copyFile(t, path, ckpt) }}})
	require.NoError(t, err)
	defer db.Close()
	workload(t, db, m, "seq", 1, 10)
	workload(t, db, m, "conc", 8, 20)
	st := db.Stats()
	t.Logf("%d updates in %d commits", st.Updates, st.Commits)
	require.EqualValues(t, 1, st.Checkpoints, "no checkpoint but Open's")
	requireStageMoved(t, db.bdb)
	want := contents(t, db.bdb)

	killed := killCopy(t, path)
	copyFile(t, path+walSuffix, ckpt+walSuffix)
	require.NoError(t, db.Close())

	// The checkpoint's file alone lacks the writes of the second session.
	bare := filepath.Join(t.TempDir(), "crux.db")
	copyFile(t, ckpt, bare)
	bdb, err := bbolt.Open(bare, fileMode, &bbolt.Options{ReadOnly: true})
	require.NoError(t, err)
	for bucket, entries := range contents(t, bdb) {
		for k := range entries {
			require.False(t, strings.HasPrefix(k, "seq-") || strings.HasPrefix(k, "conc-"), "%q in %q is in the checkpoint's file", k, bucket)
		}
	}
	require.NoError(t, bdb.Close())

	for name, p := range map[string]string{"killed": killed, "checkpoint file, log at the kill": ckpt} {
		t.Run(name, func(t *testing.T) {
			db := openChecked(t, p, nil)
			m.check(t, db)
			assert.Equal(t, want, contents(t, db.bdb), "bbolt's buckets, stages included")
		})
	}
}

// TestWALKillBeforeRecord: a kill after a commit's pages are written and
// before its record is, recovers exactly the state of the commit before,
// whichever meta page the unlogged commit wrote: Open restores both.
func TestWALKillBeforeRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	commits := 0
	killedAt := map[int]string{} // commit number (from 1) → kill copy
	db, err := Open(path, &Options{hooks: &hooks{afterCommit: func() {
		commits++
		if commits == 5 || commits == 6 {
			killedAt[commits] = killCopy(t, path)
		}
	}}})
	require.NoError(t, err)
	defer db.Close()
	states := []map[string]map[string]string{contents(t, db.bdb)} // states[i]: after commit i
	for i := range 8 {
		require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
			if i >= 2 {
				if err := tx.Delete("b", fmt.Appendf(nil, "k%d", i-2)); err != nil {
					return err
				}
			}
			return tx.Put("b", fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
		}))
		states = append(states, contents(t, db.bdb))
	}
	require.Len(t, killedAt, 2)
	for n, p := range killedAt {
		t.Run(fmt.Sprintf("commit %d", n), func(t *testing.T) {
			rec := openChecked(t, p, nil)
			assert.Equal(t, states[n-1], contents(t, rec.bdb))
		})
	}
}

// corruptMetas overwrites the meta (past the page header) of both meta
// pages of the bbolt file at path.
func corruptMetas(t testing.TB, path string, pageSize int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	garbage := bytes.Repeat([]byte{0xA5}, metaSize-metaMagicAt)
	for id := range 2 {
		_, err := f.WriteAt(garbage, int64(id*pageSize+metaMagicAt))
		require.NoError(t, err)
	}
}

// TestWALRecoveryRestoresMeta: with both meta pages of a killed copy
// overwritten, bbolt alone cannot open it; Open writes the checkpoint's
// meta page back and recovers the full state from the log.
func TestWALRecoveryRestoresMeta(t *testing.T) {
	m := newWALModel()
	db := openTest(t, nil)
	workload(t, db, m, "w", 4, 15)
	want := contents(t, db.bdb)
	pageSize := db.bdb.Info().PageSize
	killed := killCopy(t, db.Path())
	corruptMetas(t, killed, pageSize)

	bare := filepath.Join(t.TempDir(), "crux.db")
	copyFile(t, killed, bare)
	_, err := bbolt.Open(bare, fileMode, &bbolt.Options{ReadOnly: true})
	require.Error(t, err, "the corrupted copy opens without the log's meta page")

	rec := openChecked(t, killed, nil)
	m.check(t, rec)
	assert.Equal(t, want, contents(t, rec.bdb))
}

// memWAL is a walFile in memory.
type memWAL struct {
	mu sync.Mutex
	b  []byte
}

func (m *memWAL) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.NewReader(m.b).ReadAt(p, off)
}

func (m *memWAL) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func (m *memWAL) Sync() error  { return nil }
func (m *memWAL) Close() error { return nil }

// bytes returns a copy of the file's contents.
func (m *memWAL) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.b)
}

// logPayloads reads the records of generation gen from f, returning their
// payloads and the offset readRecords ended at.
func logPayloads(t testing.TB, f io.ReaderAt, gen uint64) ([]string, int64) {
	t.Helper()
	var out []string
	end, err := readRecords(f, gen, func(p []byte) error {
		out = append(out, string(p))
		return nil
	})
	require.NoError(t, err)
	return out, end
}

// TestWALReadRecords: readRecords returns the records of its generation in
// order and stops, without error, at the first record that is torn (bad
// checksum), of another generation, of length zero or beyond bounds, or
// cut short by the end of the file.
func TestWALReadRecords(t *testing.T) {
	const gen = 7
	f := &memWAL{}
	w := &wal{f: f, gen: gen, end: walRecords}
	var payloads []string
	var offs []int64 // offs[i] is where record i starts; the last is the end
	for i := range 3 {
		rec := make([]byte, recHeader)
		rec = putRec(rec, "b", fmt.Appendf(nil, "k%d", i), bytes.Repeat([]byte{byte('a' + i)}, 10*(i+1)))
		rec = appendDelete(rec, "c", fmt.Appendf(nil, "d%d", i))
		offs = append(offs, w.end)
		require.NoError(t, w.append(rec))
		payloads = append(payloads, string(rec[recHeader:]))
	}
	offs = append(offs, w.end)
	intact := f.bytes()
	require.Len(t, intact, int(w.end))

	got, end := logPayloads(t, bytes.NewReader(intact), gen)
	assert.Equal(t, payloads, got, "every record, in order")
	assert.Equal(t, offs[3], end)

	// The file as createWAL makes it: zeroes past the last record.
	padded := append(bytes.Clone(intact), make([]byte, 1000)...)
	got, end = logPayloads(t, bytes.NewReader(padded), gen)
	assert.Equal(t, payloads, got)
	assert.Equal(t, offs[3], end, "a zero length ends the records")

	// Another generation's records are not this one's.
	got, end = logPayloads(t, bytes.NewReader(intact), gen+1)
	assert.Empty(t, got)
	assert.EqualValues(t, walRecords, end)

	// Each way the second record can be damaged ends the log after the
	// first.
	second := offs[1]
	damage := map[string]func(b []byte) []byte{
		"payload byte flipped": func(b []byte) []byte { b[second+recHeader+3] ^= 0x10; return b },
		"checksum flipped":     func(b []byte) []byte { b[second+4] ^= 1; return b },
		"length changed":       func(b []byte) []byte { b[second]--; return b },
		"zero length": func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[second:], 0)
			return b
		},
		"zero length, checksum valid": func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[second:], 0)
			binary.LittleEndian.PutUint32(b[second+4:], crc32.Checksum(b[second+8:second+recHeader], castagnoli))
			return b
		},
		"length beyond maxLogRecord, checksum valid": func(b []byte) []byte {
			payload := bytes.Repeat([]byte{opPut}, maxLogRecord+1)
			rec := binary.LittleEndian.AppendUint32(b[:second:second], uint32(len(payload)))
			rec = binary.LittleEndian.AppendUint32(rec, crc32.Update(crc32.Checksum(b[second+8:second+recHeader], castagnoli), castagnoli, payload))
			rec = binary.LittleEndian.AppendUint64(rec, gen)
			return append(rec, payload...)
		},
		"length beyond maxLogRecord": func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[second:], maxLogRecord+1)
			return b
		},
		"older generation, checksum valid": func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[second+8:], gen-1)
			binary.LittleEndian.PutUint32(b[second+4:], crc32.Checksum(b[second+8:offs[2]], castagnoli))
			return b
		},
		"newer generation, checksum valid": func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[second+8:], gen+1)
			binary.LittleEndian.PutUint32(b[second+4:], crc32.Checksum(b[second+8:offs[2]], castagnoli))
			return b
		},
		"cut in its header":  func(b []byte) []byte { return b[:second+recHeader/2] },
		"cut in its payload": func(b []byte) []byte { return b[:offs[2]-1] },
		"cut before it":      func(b []byte) []byte { return b[:second] },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			got, end := logPayloads(t, bytes.NewReader(fn(bytes.Clone(intact))), gen)
			assert.Equal(t, payloads[:1], got)
			assert.Equal(t, second, end)
		})
	}

	// An error of fn ends the reading and is returned.
	errStop := errors.New("stop")
	n := 0
	end, err := readRecords(bytes.NewReader(intact), gen, func([]byte) error {
		if n++; n == 2 {
			return errStop
		}
		return nil
	})
	assert.ErrorIs(t, err, errStop)
	assert.Equal(t, second, end)
}

// TestWALReadHeader: readHeader returns the valid slot of the higher
// generation, falls back to the other slot when that one is torn, and
// reports no header when neither slot is valid.
func TestWALReadHeader(t *testing.T) {
	f := &memWAL{}
	w := &wal{f: f}
	meta := func(i byte) (m [metaSize]byte) {
		for j := range m {
			m[j] = i + byte(j)
		}
		return m
	}
	_, ok, err := readHeader(bytes.NewReader(nil))
	require.NoError(t, err)
	require.False(t, ok, "an empty file")

	write := func(h walHeader) {
		t.Helper()
		require.NoError(t, w.writeHeader(h))
	}
	read := func(b []byte) (walHeader, bool) {
		t.Helper()
		h, ok, err := readHeader(bytes.NewReader(b))
		require.NoError(t, err)
		return h, ok
	}

	write(walHeader{pageSize: 4096, meta: meta(1)}) // generation 1, slot 1
	h, ok := read(f.bytes())
	require.True(t, ok)
	assert.Equal(t, walHeader{gen: 1, pageSize: 4096, meta: meta(1)}, h)

	write(walHeader{pageSize: 8192, clean: true, meta: meta(2)}) // generation 2, slot 0
	h, ok = read(f.bytes())
	require.True(t, ok)
	assert.Equal(t, walHeader{gen: 2, clean: true, pageSize: 8192, meta: meta(2)}, h, "slot 0's generation is the higher")

	write(walHeader{pageSize: 4096, meta: meta(3)}) // generation 3, slot 1
	b := f.bytes()
	h, ok = read(b)
	require.True(t, ok)
	assert.Equal(t, walHeader{gen: 3, pageSize: 4096, meta: meta(3)}, h, "slot 1's generation is the higher")

	// Generation 3 torn, in its meta or its checksum: generation 2 is in force.
	for _, at := range []int{hdrGen, hdrFlags, hdrMeta + 40, hdrCRC} {
		torn := bytes.Clone(b)
		torn[walSlot+at] ^= 0x40
		h, ok = read(torn)
		require.True(t, ok)
		assert.EqualValues(t, 2, h.gen, "slot 1 torn at %d", at)
		assert.Equal(t, meta(2), h.meta)
	}
	// A slot written only in part: its first half new, the rest zeroes.
	torn := bytes.Clone(b)
	clear(torn[walSlot+hdrSize/2 : walSlot+hdrSize])
	h, ok = read(torn)
	require.True(t, ok)
	assert.EqualValues(t, 2, h.gen)

	// A slot whose checksum holds but whose magic is not the log's.
	torn = bytes.Clone(b)
	torn[walSlot+7] = 2
	binary.LittleEndian.PutUint32(torn[walSlot+hdrCRC:], crc32.Checksum(torn[walSlot:walSlot+hdrCRC], castagnoli))
	h, ok = read(torn)
	require.True(t, ok)
	assert.EqualValues(t, 2, h.gen, "not a header of this log's format")

	// Both torn: no header.
	torn = bytes.Clone(b)
	torn[hdrMeta] ^= 1
	torn[walSlot+hdrMeta] ^= 1
	_, ok = read(torn)
	assert.False(t, ok)

	// Only slot 0 there (the file cut short): it is read.
	h, ok = read(b[:walSlot])
	require.True(t, ok)
	assert.EqualValues(t, 2, h.gen)

	// A read error is returned.
	errRead := errors.New("read error")
	_, _, err = readHeader(errReaderAt{errRead})
	assert.ErrorIs(t, err, errRead)
}

// errReaderAt fails every read.
type errReaderAt struct{ err error }

func (r errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, r.err }

// TestWALApplyRecord: applyRecord applies a record's puts and deletes in
// order, and rejects with errBadRecord a payload that does not decode.
func TestWALApplyRecord(t *testing.T) {
	bdb, err := bbolt.Open(filepath.Join(t.TempDir(), "x.db"), fileMode, nil)
	require.NoError(t, err)
	defer bdb.Close()

	var p []byte
	p = putRec(p, "b", []byte("k1"), []byte("v1"))
	p = putRec(p, "b", []byte("k2"), []byte("v2"))
	p = putRec(p, "c", []byte("k3"), nil)
	p = appendDelete(p, "b", []byte("k1"))
	p = putRec(p, "b", []byte("k2"), []byte("v2b"))
	p = appendDelete(p, "missing", []byte("k"))
	p = appendDelete(p, "b", []byte("never"))
	require.NoError(t, bdb.Update(func(btx *bbolt.Tx) error { return applyRecord(btx, p) }))
	assert.Equal(t, map[string]map[string]string{"b": {"k2": "v2b"}, "c": {"k3": ""}}, contents(t, bdb))

	// bbolt keeps a put's value until the commit: applyRecord must not
	// hand it the payload's bytes, which readRecords reuses for the next
	// record.
	reused := putRec(nil, "r", []byte("k1"), []byte("first"))
	require.NoError(t, bdb.Update(func(btx *bbolt.Tx) error {
		if err := applyRecord(btx, reused); err != nil {
			return err
		}
		copy(reused, putRec(nil, "r", []byte("k2"), []byte("other")))
		return applyRecord(btx, reused)
	}))
	assert.Equal(t, map[string]string{"k1": "first", "k2": "other"}, contents(t, bdb)["r"], "the first value survives its buffer's reuse")
	require.NoError(t, bdb.Update(func(btx *bbolt.Tx) error { return btx.DeleteBucket([]byte("r")) }))

	put := putRec(nil, "b", []byte("k"), []byte("value"))
	uv := func(b []byte, n uint64) []byte { return binary.AppendUvarint(b, n) }
	bad := map[string][]byte{
		"unknown op":         append([]byte{9}, put[1:]...),
		"op alone":           {opPut},
		"value cut short":    put[:len(put)-1],
		"value missing":      append([]byte{opPut}, appendString(appendString(nil, "b"), "k")...),
		"empty bucket":       putRec(nil, "", []byte("k"), []byte("v")),
		"empty key":          putRec(nil, "b", nil, []byte("v")),
		"empty key, delete":  appendDelete(nil, "b", nil),
		"bucket too long":    append(uv([]byte{opDelete}, 1<<40), 'b', 1, 'k'),
		"key too long":       append(uv(appendString([]byte{opDelete}, "b"), 5), 'k'),
		"bad uvarint":        append([]byte{opPut}, bytes.Repeat([]byte{0xff}, 11)...),
		"valid then garbage": append(bytes.Clone(put), 0),
	}
	for name, payload := range bad {
		t.Run(name, func(t *testing.T) {
			err := bdb.Update(func(btx *bbolt.Tx) error { return applyRecord(btx, payload) })
			assert.ErrorIs(t, err, errBadRecord)
		})
	}
	assert.Equal(t, map[string]map[string]string{"b": {"k2": "v2b"}, "c": {"k3": ""}}, contents(t, bdb), "nothing applied")
}

// readLogHeader reads the header in force of the log at path.
func readLogHeader(t testing.TB, path string) walHeader {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, ok, err := readHeader(f)
	require.NoError(t, err)
	require.True(t, ok, "the log has no valid header")
	return h
}

// TestWALCleanClose: Close marks the log clean; the next Open restores and
// replays nothing: a key deleted from the file behind the log's back,
// which the log's records put, stays deleted.
func TestWALCleanClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	m := newWALModel()
	db, err := Open(path, nil)
	require.NoError(t, err)
	workload(t, db, m, "w", 2, 10)
	gen := db.wal.gen
	require.NoError(t, db.Close())

	h := readLogHeader(t, path+walSuffix)
	assert.True(t, h.clean)
	assert.Equal(t, gen+1, h.gen)
	recs, _ := logPayloads(t, mustOpen(t, path+walSuffix), gen)
	require.NotEmpty(t, recs, "the records of the last generation are still in the file")

	// Delete a key in the file itself; the log's records put it.
	victim := "w-w00-r009"
	bdb, err := bbolt.Open(path, fileMode, nil)
	require.NoError(t, err)
	require.NoError(t, bdb.Update(func(btx *bbolt.Tx) error { return btx.Bucket([]byte("b")).Delete([]byte(victim)) }))
	require.NoError(t, bdb.Close())
	m.del("b", victim)

	db = openChecked(t, path, nil)
	assert.EqualValues(t, 1, db.Stats().Checkpoints, "Open's checkpoint only")
	m.check(t, db)
}

// mustOpen opens path for reading and closes it at cleanup.
func mustOpen(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWALReadOnly: a read-only Open of a database whose log was not
// closed cleanly fails with ErrNeedsRecovery, changing nothing; once a
// read-write Open has recovered it, and of a database closed cleanly, a
// read-only Open works.
func TestWALReadOnly(t *testing.T) {
	m := newWALModel()
	dirty := checkpointCopy(t, m)
	before, err := os.ReadFile(dirty)
	require.NoError(t, err)
	beforeLog, err := os.ReadFile(dirty + walSuffix)
	require.NoError(t, err)

	_, err = Open(dirty, &Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNeedsRecovery)
	after, err := os.ReadFile(dirty)
	require.NoError(t, err)
	afterLog, err := os.ReadFile(dirty + walSuffix)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "the file is unchanged")
	assert.True(t, bytes.Equal(beforeLog, afterLog), "the log is unchanged")

	db, err := Open(dirty, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	ro := openChecked(t, dirty, &Options{ReadOnly: true})
	m.check(t, ro)

	// A database closed cleanly, and one without a log.
	for name, opts := range map[string]*Options{"log": nil, "no log": {NoWAL: true}} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crux.db")
			db, err := Open(path, opts)
			require.NoError(t, err)
			put(t, db, "k", "v")
			require.NoError(t, db.Close())
			ro := openChecked(t, path, &Options{ReadOnly: true})
			v, err := get(t, ro, "k")
			require.NoError(t, err)
			assert.Equal(t, "v", v)
		})
	}
}

// TestWALOff: with NoWAL or NoSync, no log is made; Open with either
// applies a log left by a database not closed cleanly, then removes it.
func TestWALOff(t *testing.T) {
	for name, opts := range map[string]*Options{"NoWAL": {NoWAL: true}, "NoSync": {NoSync: true}} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crux.db")
			db, err := Open(path, opts)
			require.NoError(t, err)
			put(t, db, "k", "v")
			assert.Nil(t, db.wal)
			assert.NoFileExists(t, path+walSuffix)
			require.NoError(t, db.Close())
			assert.NoFileExists(t, path+walSuffix)
			assert.Zero(t, db.Stats().Checkpoints)

			m := newWALModel()
			dirty := checkpointCopy(t, m)
			db = openChecked(t, dirty, opts)
			m.check(t, db)
			assert.Nil(t, db.wal)
			assert.NoFileExists(t, dirty+walSuffix)
			put(t, db, "more", "v")
			require.NoError(t, db.Close())
			db = openChecked(t, dirty, opts)
			m.check(t, db)
		})
	}
}

// faultyWAL is a walFile whose writes and flushes fail on demand. before,
// if set, is called before each write, with its offset.
type faultyWAL struct {
	walFile
	failWrite, failSync, failHeader atomic.Bool
	mu                              sync.Mutex
	before                          func(off int64)
}

var errInjected = errors.New("injected log failure")

func (f *faultyWAL) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	before := f.before
	f.mu.Unlock()
	if before != nil {
		before(off)
	}
	if f.failWrite.Load() || (f.failHeader.Load() && off < walRecords) {
		return 0, errInjected
	}
	return f.walFile.WriteAt(p, off)
}

func (f *faultyWAL) Sync() error {
	if f.failSync.Load() {
		return errInjected
	}
	return f.walFile.Sync()
}

func (f *faultyWAL) setBefore(fn func(off int64)) {
	f.mu.Lock()
	f.before = fn
	f.mu.Unlock()
}

// faultyOptions returns options whose log's file is wrapped in a
// faultyWAL, which *fw is set to.
func faultyOptions(fw **faultyWAL, h *hooks) *Options {
	if h == nil {
		h = &hooks{}
	}
	h.wrapWAL = func(f walFile) walFile {
		*fw = &faultyWAL{walFile: f}
		return *fw
	}
	return &Options{hooks: h}
}

// TestWALWriteFailure: when the log cannot be written (a record, its
// flush, or a checkpoint's header), the Update still succeeds: the file is
// flushed and the log removed. Later commits flush the file themselves,
// and everything is there after a reopen, which starts a new log.
func TestWALWriteFailure(t *testing.T) {
	cases := map[string]struct {
		hooks *hooks
		fail  func(fw *faultyWAL)
	}{
		"record write":      {fail: func(fw *faultyWAL) { fw.failWrite.Store(true) }},
		"record flush":      {fail: func(fw *faultyWAL) { fw.failSync.Store(true) }},
		"checkpoint header": {hooks: &hooks{checkpointBytes: 1}, fail: func(fw *faultyWAL) { fw.failHeader.Store(true) }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crux.db")
			var fw *faultyWAL
			db, err := Open(path, faultyOptions(&fw, c.hooks))
			require.NoError(t, err)
			defer db.Close()
			m := newWALModel()
			workload(t, db, m, "before", 1, 10)
			require.NotNil(t, db.wal)

			c.fail(fw)
			put(t, db, "failing", "v")
			m.put("b", "failing", "v")
			assert.Nil(t, db.wal, "the log is abandoned")
			assert.False(t, db.bdb.NoSync, "commits flush the file")
			assert.False(t, db.pinned())
			assert.NoFileExists(t, path+walSuffix)
			m.check(t, db)

			workload(t, db, m, "after", 2, 10)
			assert.NoFileExists(t, path+walSuffix)
			require.NoError(t, db.Close())

			db = openChecked(t, path, nil)
			m.check(t, db)
			assert.NotNil(t, db.wal, "a new log")
			assert.FileExists(t, path+walSuffix)
		})
	}
}

// TestWALRemoveFailure: when the log cannot be written and cannot be
// removed either, the Update fails and so do the later ones; the log
// still holds every Update that returned nil, which the next Open
// recovers. (The tests run as root, whom file modes do not stop: a
// directory in the log's place makes its removal fail.)
func TestWALRemoveFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	var fw *faultyWAL
	db, err := Open(path, faultyOptions(&fw, nil))
	require.NoError(t, err)
	defer db.Close()
	m := newWALModel()
	workload(t, db, m, "before", 2, 10)

	aside := filepath.Join(t.TempDir(), "wal")
	require.NoError(t, os.Rename(path+walSuffix, aside))
	require.NoError(t, os.Mkdir(path+walSuffix, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(path+walSuffix, "x"), nil, 0o600))
	fw.failWrite.Store(true)
	err = db.Update(context.Background(), func(tx store.Tx) error { return tx.Put("b", []byte("failing"), []byte("v")) })
	require.Error(t, err)
	err2 := db.Update(context.Background(), func(tx store.Tx) error { return tx.Put("b", []byte("later"), []byte("v")) })
	require.Error(t, err2)
	assert.Contains(t, err.Error(), err2.Error(), "the first failure fails the later Updates")

	// Compact fails too: the dirty log recovers on this file, which must
	// stay in place.
	file, err := os.Stat(path)
	require.NoError(t, err)
	require.Error(t, db.Compact(context.Background()))
	still, err := os.Stat(path)
	require.NoError(t, err)
	assert.True(t, os.SameFile(file, still), "the file was not replaced")

	require.NoError(t, os.RemoveAll(path+walSuffix))
	require.NoError(t, os.Rename(aside, path+walSuffix))
	require.NoError(t, db.Close())
	assert.False(t, readLogHeader(t, path+walSuffix).clean, "the log is left to recover from")

	db = openChecked(t, path, nil)
	m.check(t, db)
	_, err = get(t, db, "later")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// TestWALEmptyRecord: a commit with no change to replay (its fn went on
// after a Put failed) leaves no empty record, which would read as the end
// of the log: the commits after it are recovered.
func TestWALEmptyRecord(t *testing.T) {
	m := newWALModel()
	path := filepath.Join(t.TempDir(), "crux.db")
	dst := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, &Options{hooks: &hooks{pinRelease: time.Hour, afterCheckpoint: func() { copyFile(t, path, dst) }}})
	require.NoError(t, err)
	defer db.Close()
	put(t, db, "k1", "v1")
	m.put("b", "k1", "v1")
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		err := tx.Put("b", make([]byte, bbolt.MaxKeySize+1), []byte("v"))
		assert.Error(t, err, "key too large")
		return nil
	}))
	put(t, db, "k2", "v2")
	m.put("b", "k2", "v2")
	require.EqualValues(t, 1, db.Stats().Checkpoints)
	copyFile(t, path+walSuffix, dst+walSuffix)

	rec := openChecked(t, dst, nil)
	m.check(t, rec)
}

// TestWALRemapWhilePinned: with a small memory map, commits must remap
// the file while the pin is held; bbolt's remap waits for every read
// transaction, so the pin is dropped and the next commit makes a
// checkpoint. The writes finish, and a kill copy recovers them all.
func TestWALRemapWhilePinned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	const mmap = 64 << 10
	db, err := Open(path, &Options{hooks: &hooks{mmapSize: mmap, checkpointBytes: 1 << 40}})
	require.NoError(t, err)
	m := newWALModel()
	const n = 300
	// A kill between a dropped pin and the next commit's checkpoint: the
	// files as they are then, and what the Updates had written.
	type kill struct {
		file, log []byte
		model     *walModel
	}
	var kills []kill
	done := make(chan error, 1)
	go func() {
		for i := range n {
			k := fmt.Sprintf("k%04d", i)
			v := strings.Repeat(string(rune('a'+i%26)), 3000+i)
			if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.Put("b", []byte(k), []byte(v)) }); err != nil {
				done <- err
				return
			}
			m.put("b", k, v)
			if !db.pinned() && len(kills) < 3 {
				file, err := os.ReadFile(path)
				if err == nil {
					var log []byte
					log, err = os.ReadFile(path + walSuffix)
					kills = append(kills, kill{file, log, m.clone()})
				}
				if err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the writes did not finish: a commit waits for the pin to remap the file") // db left open: it is stuck
	}
	defer db.Close()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(8*mmap), "the file outgrew the initial map several times")
	st := db.Stats()
	t.Logf("%d checkpoints", st.Checkpoints)
	assert.Greater(t, st.Checkpoints, uint64(2), "checkpoints after dropped pins (periodic ones are off)")

	killed := killCopy(t, path)
	rec := openChecked(t, killed, nil)
	m.check(t, rec)
	assert.Equal(t, contents(t, db.bdb), contents(t, rec.bdb))

	require.NotEmpty(t, kills, "no Update returned with the pin dropped")
	for i, k := range kills {
		t.Run(fmt.Sprintf("killed with the pin dropped %d", i), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "crux.db")
			require.NoError(t, os.WriteFile(p, k.file, 0o600))
			require.NoError(t, os.WriteFile(p+walSuffix, k.log, 0o600))
			k.model.check(t, openChecked(t, p, nil))
		})
	}
}

// TestWALLargeRecord: a commit whose record is larger than the largest
// the log takes is made durable by a checkpoint instead, and a kill right
// after recovers it, from the file.
func TestWALLargeRecord(t *testing.T) {
	db := openTest(t, &Options{hooks: &hooks{pinRelease: time.Hour, maxRecord: 4096}})
	m := newWALModel()
	for i := range 3 {
		k, v := fmt.Sprintf("small%d", i), strings.Repeat("s", 500)
		put(t, db, k, v)
		m.put("b", k, v)
	}
	require.EqualValues(t, 1, db.Stats().Checkpoints, "small records go to the log")
	require.Greater(t, db.wal.end, int64(walRecords))

	big := strings.Repeat("B", 10000)
	put(t, db, "big", big)
	m.put("b", "big", big)
	assert.EqualValues(t, 2, db.Stats().Checkpoints, "the large commit made a checkpoint")
	assert.EqualValues(t, walRecords, db.wal.end, "no record since the checkpoint")

	killed := killCopy(t, db.Path())
	h := readLogHeader(t, killed+walSuffix)
	recs, _ := logPayloads(t, mustOpen(t, killed+walSuffix), h.gen)
	assert.Empty(t, recs, "the log has no record of the large commit")
	rec := openChecked(t, killed, nil)
	m.check(t, rec)

	// A small commit goes to the log again.
	put(t, db, "after", "v")
	assert.EqualValues(t, 2, db.Stats().Checkpoints)
	assert.Greater(t, db.wal.end, int64(walRecords))
}

// TestWALLargeRecordCheckpointFails: when the checkpoint that makes a
// large commit durable fails before writing the header, the commit is in
// neither the log nor the flushed file: the log is abandoned, which
// flushes the file, so that a later commit that saw the large one is never
// recovered without it.
func TestWALLargeRecordCheckpointFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	aside := filepath.Join(t.TempDir(), "moved")
	var moveAway atomic.Bool
	db, err := Open(path, &Options{hooks: &hooks{maxRecord: 4096, afterCommit: func() {
		if moveAway.Load() {
			// The checkpoint reads the meta page through the file's
			// path: it fails before writing the header.
			require.NoError(t, os.Rename(path, aside))
		}
	}}})
	require.NoError(t, err)
	defer db.Close()
	put(t, db, "small", "v")
	moveAway.Store(true)
	big := strings.Repeat("B", 10000)
	err = db.Update(context.Background(), func(tx store.Tx) error { return tx.Put("b", []byte("big"), []byte(big)) })
	moveAway.Store(false)
	require.NoError(t, os.Rename(aside, path))
	assert.NoError(t, err, "the commit is made durable without the log")
	assert.Nil(t, db.wal)
	assert.NoFileExists(t, path+walSuffix)

	// A later Update reads the large commit's key and writes what it saw.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Get("b", []byte("big"))
		return tx.Put("b", []byte("saw big"), []byte(fmt.Sprint(err == nil)))
	}))

	// Killed now: what the files hold is recovered.
	killed := filepath.Join(t.TempDir(), "crux.db")
	copyFile(t, path, killed)
	if _, err := os.Stat(path + walSuffix); err == nil {
		copyFile(t, path+walSuffix, killed+walSuffix)
	}
	rec := openChecked(t, killed, nil)
	saw, err := get(t, rec, "saw big")
	require.NoError(t, err)
	require.Equal(t, "true", saw)
	v, err := get(t, rec, "big")
	require.NoError(t, err, "the later commit saw it")
	assert.Equal(t, big, v)
}

// TestWALPeriodicCheckpoint: once the log holds checkpointBytes of
// records, a checkpoint starts it afresh: its records restart at
// walRecords under a new generation, and the older generation's records
// beyond them are not replayed.
func TestWALPeriodicCheckpoint(t *testing.T) {
	const limit = 8 << 10
	db := openTest(t, &Options{hooks: &hooks{pinRelease: time.Hour, checkpointBytes: limit}})
	m := newWALModel()
	const n, keys = 200, 20
	kv := func(i int) (string, string) {
		return fmt.Sprintf("k%02d", i%keys), fmt.Sprintf("v%05d-%s", i, strings.Repeat("p", 150))
	}
	k0, v0 := kv(0)
	recSize := len(putRec(make([]byte, recHeader), "b", []byte(k0), []byte(v0)))
	since := 0 // records since the last checkpoint
	for i := range n {
		before := db.Stats().Checkpoints
		k, v := kv(i)
		put(t, db, k, v)
		m.put("b", k, v)
		if db.Stats().Checkpoints != before {
			since = 0
		} else {
			since++
		}
	}
	perCheckpoint := (limit + recSize - 1) / recSize
	assert.EqualValues(t, 1+n/perCheckpoint, db.Stats().Checkpoints, "one checkpoint per %d records of %d bytes", perCheckpoint, recSize)
	require.Greater(t, db.Stats().Checkpoints, uint64(1))

	f := mustOpen(t, db.Path()+walSuffix)
	h, ok, err := readHeader(f)
	require.NoError(t, err)
	require.True(t, ok)
	assert.False(t, h.clean)
	assert.Equal(t, db.wal.gen, h.gen)
	recs, end := logPayloads(t, f, h.gen)
	assert.Len(t, recs, since, "the records since the last checkpoint")
	assert.Equal(t, int64(walRecords+since*recSize), end)
	assert.Equal(t, db.wal.end, end)

	// Beyond them lie the previous generation's records, which replaying
	// them would bring back older values.
	var hdr [recHeader]byte
	_, err = f.ReadAt(hdr[:], end)
	require.NoError(t, err)
	assert.Equal(t, h.gen-1, binary.LittleEndian.Uint64(hdr[8:]), "a record of the previous generation follows")
	assert.EqualValues(t, recSize-recHeader, binary.LittleEndian.Uint32(hdr[0:]))

	killed := killCopy(t, db.Path())
	rec := openChecked(t, killed, nil)
	m.check(t, rec)
}

// TestWALCompact: Compact marks the log clean before the new file takes
// the old one's place and makes a checkpoint of the new file after; a
// kill at any header write it makes, and a kill after more writes on the
// compacted file, recover everything.
func TestWALCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	var fw *faultyWAL
	db, err := Open(path, faultyOptions(&fw, nil))
	require.NoError(t, err)
	defer db.Close()
	m := newWALModel()
	workload(t, db, m, "before", 4, 15)
	want := contents(t, db.bdb)
	oldFile, err := os.Stat(path)
	require.NoError(t, err)

	var kills []string
	fw.setBefore(func(off int64) {
		if off < walRecords {
			kills = append(kills, killCopy(t, path))
		}
	})
	ckpts := db.Stats().Checkpoints
	require.NoError(t, db.Compact(context.Background()))
	fw.setBefore(nil)
	assert.Equal(t, ckpts+1, db.Stats().Checkpoints, "a checkpoint of the new file")
	newFile, err := os.Stat(path)
	require.NoError(t, err)
	require.False(t, os.SameFile(oldFile, newFile), "the file was replaced")
	require.Len(t, kills, 2, "Compact writes the header twice: clean, then the new checkpoint")
	for i, p := range kills {
		t.Run(fmt.Sprintf("killed at header write %d", i), func(t *testing.T) {
			rec := openChecked(t, p, nil)
			m.check(t, rec)
			assert.Equal(t, want, contents(t, rec.bdb))
		})
	}

	workload(t, db, m, "after", 4, 15)
	killed := killCopy(t, path)
	rec := openChecked(t, killed, nil)
	m.check(t, rec)
	assert.Equal(t, contents(t, db.bdb), contents(t, rec.bdb))
}

// TestWALLogOfAnotherFile: Open refuses a log whose checkpoint is of a
// larger file than the one beside it, leaving that file unchanged.
func TestWALLogOfAnotherFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(big, nil)
	require.NoError(t, err)
	for i := range 100 {
		put(t, db, fmt.Sprintf("k%03d", i), strings.Repeat("v", 5000))
	}
	require.NoError(t, db.Close())
	db, err = Open(big, nil) // its checkpoint is of the large state
	require.NoError(t, err)
	put(t, db, "more", "v")
	killed := killCopy(t, big)
	require.NoError(t, db.Close())

	small := filepath.Join(t.TempDir(), "crux.db")
	db, err = Open(small, nil)
	require.NoError(t, err)
	put(t, db, "small", "v")
	require.NoError(t, db.Close())
	before, err := os.ReadFile(small)
	require.NoError(t, err)
	fi, err := os.Stat(killed)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(len(before)))

	copyFile(t, killed+walSuffix, small+walSuffix)
	_, err = Open(small, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "belongs to another file")
	after, err := os.ReadFile(small)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "the file is unchanged")
	_, err = os.Stat(small + walSuffix)
	assert.False(t, errors.Is(err, fs.ErrNotExist), "the log is kept")
}

// putRec is appendPut without the copies of key and value.
func putRec(rec []byte, bucket string, key, value []byte) []byte {
	rec, _, _ = appendPut(rec, bucket, key, value)
	return rec
}
