package bolt

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// metaFreelistAt is where a bbolt meta page holds its freelist's page id.
const metaFreelistAt = 48

// noFreelist is bbolt's freelist page id of a commit that wrote none.
const noFreelist = ^uint64(0)

// lastFreelist returns the freelist page id in the valid meta page of the
// highest transaction of the database file at path.
func lastFreelist(t testing.TB, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pageSize := int(binary.NativeEndian.Uint32(b[metaPageAt:]))
	var best, txid uint64
	found := false
	for i := range 2 {
		m := b[i*pageSize : i*pageSize+metaSize]
		if !validMeta(m) {
			continue
		}
		if id := binary.NativeEndian.Uint64(m[metaTxidAt:]); !found || id > txid {
			best, txid, found = binary.NativeEndian.Uint64(m[metaFreelistAt:]), id, true
		}
	}
	require.True(t, found, "no valid meta page in %s", path)
	return best
}

// A clean Close writes the list of free pages, which the next Open reads
// instead of walking the file; the next commit drops it again, and a
// crash at any point opens to every acknowledged write.
func TestCloseSavesFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	m := newWALModel()
	db, err := Open(path, nil)
	require.NoError(t, err)
	workload(t, db, m, "a", 2, 20)
	assert.Equal(t, noFreelist, lastFreelist(t, path), "commits do not write the list")

	// Stopped after the list's commit, before the log is marked clean:
	// the next Open restores the checkpoint and replays the log.
	require.NoError(t, db.saveFreelist())
	assert.NotEqual(t, noFreelist, lastFreelist(t, path))
	m.check(t, openChecked(t, killCopy(t, path), nil))

	require.NoError(t, db.Close())
	assert.NotEqual(t, noFreelist, lastFreelist(t, path), "a clean Close writes the list")

	db = openChecked(t, path, nil)
	m.check(t, db)
	workload(t, db, m, "b", 2, 20)
	assert.Equal(t, noFreelist, lastFreelist(t, path), "the first commit after Open drops the list")
	// Killed now: the checkpoint restored is the state whose list was
	// written, and the log is replayed over it.
	m.check(t, openChecked(t, killCopy(t, path), nil))
	m.check(t, db)
}

// A DB drops the pages of its map that reads have made resident.
func TestTrimMapped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the resident pages of mapped files are read on Linux only")
	}
	db, err := Open(filepath.Join(t.TempDir(), "crux.db"), nil)
	require.NoError(t, err)
	defer db.Close()
	const n, size = 4096, 8 << 10 // 32 MiB
	value := strings.Repeat("v", size)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.Put("b", binary.BigEndian.AppendUint32(nil, uint32(i)), []byte(value)); err != nil {
				return err
			}
		}
		return nil
	}))
	read := func() {
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			return tx.Scan("b", nil, false, func(k, v []byte) error {
				if len(v) != size {
					t.Fatalf("value of %x has %d bytes", k, len(v))
				}
				return nil
			})
		}))
	}
	read()
	before := residentFileBytes()
	require.True(t, db.trimMapped(-1))
	after := residentFileBytes()
	assert.Less(t, after, before-n*size/2, "resident file bytes: %d before the trim, %d after", before, after)
	read() // the pages read again are the same
	assert.Greater(t, residentFileBytes(), after+n*size/2, "reading maps the pages again")

	require.True(t, db.trimMapped(mappedLimit+1<<40), "under the limit: nothing to do")
	require.NoError(t, db.Close())
	assert.False(t, db.trimMapped(-1), "closed")
}
