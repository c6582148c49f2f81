package bolt

// Power-loss simulation. A workload writes through the log while a model
// of the disk follows the log's writes and flushes; at a random moment (a
// cut) the test takes what a power loss could leave on disk: for the log,
// every flushed byte, and of the writes not yet flushed, any 512-byte
// sectors; for the database file, its content at the last checkpoint
// (when it was flushed), and of each page changed since, the old one, the
// new one, or a mix of their sectors. The directory built from that must
// open, hold every write whose Update returned, hold of the others a
// prefix of each writer's writes (commits are atomic and ordered), and
// pass bbolt's consistency check.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

const sector = 512

// diskModel follows the log's file: what is surely on disk (durable) and
// the writes since the last flush (pending).
type diskModel struct {
	mu      sync.Mutex
	durable []byte
	pending []pendingWrite
	base    []byte // the database file as of its last flush
	dbPath  string
	cut     func() // called after each event; the test takes its cut there
}

type pendingWrite struct {
	off  int64
	data []byte
}

// modelFile is a walFile that reports its writes and flushes to a model.
type modelFile struct {
	walFile
	m *diskModel
}

func (f *modelFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.walFile.WriteAt(p, off)
	f.m.mu.Lock()
	f.m.pending = append(f.m.pending, pendingWrite{off, bytes.Clone(p[:n])})
	f.m.mu.Unlock()
	f.m.cut()
	return n, err
}

func (f *modelFile) Sync() error {
	if err := f.walFile.Sync(); err != nil {
		return err
	}
	f.m.mu.Lock()
	for _, w := range f.m.pending {
		f.m.durable = writeAt(f.m.durable, w.data, w.off)
	}
	f.m.pending = nil
	f.m.mu.Unlock()
	f.m.cut()
	return nil
}

// writeAt writes p at off into buf, growing it as a file grows.
func writeAt(buf, p []byte, off int64) []byte {
	if end := int(off) + len(p); end > len(buf) {
		buf = append(buf, make([]byte, end-len(buf))...)
	}
	copy(buf[off:], p)
	return buf
}

// cutState is what the disk held, surely or maybe, at a cut.
type cutState struct {
	walDurable []byte
	walPending []pendingWrite
	dbBase     []byte // as of the last flush
	dbNow      []byte // written since, maybe on disk
	acked      []int  // per writer, the last write whose Update returned
}

// image builds, into dir, a directory a power loss at the cut could leave.
func (c *cutState) image(t *testing.T, rng *rand.Rand, dir string, kill bool) {
	t.Helper()
	wal := bytes.Clone(c.walDurable)
	for _, w := range c.walPending {
		for s := 0; s < len(w.data); s += sector {
			if kill || rng.IntN(2) == 0 {
				e := min(s+sector, len(w.data))
				wal = writeAt(wal, w.data[s:e], w.off+int64(s))
			}
		}
	}
	db := bytes.Clone(c.dbNow)
	if !kill {
		if len(c.dbBase) < len(db) && rng.IntN(2) == 0 {
			db = db[:len(c.dbBase)] // the file's growth lost
		}
		for s := 0; s < len(db) && s < len(c.dbBase); s += sector {
			if rng.IntN(2) == 0 {
				copy(db[s:s+sector], c.dbBase[s:s+sector])
			}
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crux.db"), db, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crux.db"+walSuffix), wal, 0o600))
}

// plWrite is writer g's i-th Update: it puts keys g/i/0 .. g/i/n-1 (n from
// 1 to 3, one of them sometimes large) and deletes the keys of write i-5.
func plKeys(g, i int) [][]byte {
	n := 1 + (g*7+i)%3
	keys := make([][]byte, n)
	for k := range keys {
		keys[k] = fmt.Appendf(nil, "%d/%06d/%d", g, i, k)
	}
	return keys
}

func plValue(g, i, k int) []byte {
	v := fmt.Appendf(nil, "value of %d/%d/%d ", g, i, k)
	if (g+i+k)%11 == 0 {
		v = append(v, bytes.Repeat([]byte{byte('a' + i%26)}, 5000)...) // an overflow page
	}
	return v
}

func plWrite(g, i int) func(store.Tx) error {
	return func(tx store.Tx) error {
		for k, key := range plKeys(g, i) {
			if err := tx.Put("pl", key, plValue(g, i, k)); err != nil {
				return err
			}
		}
		if i >= 5 {
			for _, key := range plKeys(g, i-5) {
				if err := tx.Delete("pl", key); err != nil {
					return err
				}
			}
		}
		// A counter rewritten by every write: its page is written by
		// every commit.
		return tx.Put("plcount", []byte{byte(g)}, fmt.Appendf(nil, "%d", i))
	}
}

// checkRecovered opens the database in dir and checks it against the
// writes acknowledged at the cut.
func checkRecovered(t *testing.T, dir string, acked []int) {
	t.Helper()
	db, err := Open(filepath.Join(dir, "crux.db"), &Options{LockTimeout: -1})
	require.NoError(t, err, "open after the power loss")
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, db.bdb.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}), "bbolt consistency check")

	present := make(map[string][]byte)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return tx.Scan("pl", nil, false, func(k, v []byte) error {
			present[string(k)] = bytes.Clone(v)
			return nil
		})
	}))
	for g, last := range acked {
		// The writes of g that the store holds are 0..c for some c ≥
		// last: the keys of c-4..c are there, those of earlier writes
		// deleted, those of later writes absent.
		c := -1
		for i := last + 1; ; i++ {
			if _, ok := present[string(plKeys(g, i)[0])]; !ok {
				break
			}
			c = i
		}
		if c < 0 {
			c = last
		}
		for i := max(0, c-12); i <= c+3; i++ {
			for k, key := range plKeys(g, i) {
				v, ok := present[string(key)]
				want := i > c-5 && i <= c
				if ok != want {
					t.Fatalf("writer %d: write %d acknowledged, so the store should hold the keys of writes %d to %d; key %s present: %v", g, last, max(0, c-4), c, key, ok)
				}
				if ok && !bytes.Equal(v, plValue(g, i, k)) {
					t.Fatalf("key %s holds %.40q", key, v)
				}
			}
		}
	}
}

// TestPowerLoss runs the workload, cuts at a random event, and checks
// several disks the cut could leave, for a fixed time budget.
func TestPowerLoss(t *testing.T) {
	budget := 4 * time.Second
	if testing.Short() {
		budget = time.Second
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	trials, images := 0, 0
	for start := time.Now(); trials < 5 || time.Since(start) < budget; trials++ {
		images += powerLossTrial(t, rng)
	}
	t.Logf("%d trials, %d disks checked", trials, images)
}

func powerLossTrial(t *testing.T, rng *rand.Rand) int {
	dir := t.TempDir()
	path := filepath.Join(dir, "crux.db")
	const writers = 4
	var acked [writers]atomic.Int64
	for g := range acked {
		acked[g].Store(-1)
	}

	m := &diskModel{dbPath: path}
	cutAt := int64(1 + rng.IntN(600))
	var events atomic.Int64
	var cs *cutState
	m.cut = func() {
		if events.Add(1) != cutAt {
			return
		}
		// The writer is here, so nothing writes either file.
		now, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		m.mu.Lock()
		c := &cutState{
			walDurable: bytes.Clone(m.durable),
			walPending: slices.Clone(m.pending),
			dbBase:     bytes.Clone(m.base),
			dbNow:      now,
		}
		m.mu.Unlock()
		if c.dbBase == nil {
			// Open's checkpoint is writing the log's first header: the
			// file is as bbolt created and flushed it.
			c.dbBase = now
		}
		for g := range acked {
			c.acked = append(c.acked, int(acked[g].Load()))
		}
		cs = c
	}
	h := &hooks{
		checkpointBytes: int64(2048 + rng.IntN(64<<10)),
		wrapWAL: func(f walFile) walFile {
			// A new log: what is in the file is on disk.
			buf := make([]byte, walRecords+walCheckpointBytes)
			n, err := f.ReadAt(buf, 0)
			if err != nil && n == 0 {
				panic(err)
			}
			m.durable = buf[:n]
			return &modelFile{walFile: f, m: m}
		},
		afterCommit: func() { m.cut() },
		afterFlush: func() {
			base, err := os.ReadFile(path)
			if err != nil {
				panic(err)
			}
			m.mu.Lock()
			m.base = base
			m.mu.Unlock()
		},
	}
	if rng.IntN(3) == 0 {
		h.maxRecord = 2048 // some commits too large for the log
	}
	db, err := Open(path, &Options{hooks: h})
	require.NoError(t, err)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && events.Load() < cutAt; i++ {
				if err := db.Update(ctx, plWrite(g, i)); err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("writer %d, write %d: %v", g, i, err)
					}
					return
				}
				acked[g].Store(int64(i))
			}
		}()
	}
	wg.Wait()
	stop()
	require.NoError(t, db.Close())
	if cs == nil {
		t.Fatalf("no cut: %d events, cut at %d", events.Load(), cutAt)
	}

	n := 0
	for v := range 4 {
		img := t.TempDir()
		cs.image(t, rng, img, v == 0)
		checkRecovered(t, img, cs.acked)
		n++
	}
	return n
}
