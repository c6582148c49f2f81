package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// TestFullDiskRefusesAndRecovers: on a file system that is full (a small
// tmpfs, mounted for the test: it needs root), a write is refused with
// ENOSPC and the DB goes on, with and without the log: once space is freed
// the next write is stored without a reopen, and after a reopen every
// acknowledged write is there and no refused one.
func TestFullDiskRefusesAndRecovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	for _, noWAL := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWAL=%v", noWAL), func(t *testing.T) {
			dir := t.TempDir()
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
				t.Skipf("mounting a tmpfs: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			path := filepath.Join(dir, "crux.db")
			db, err := Open(path, &Options{NoWAL: noWAL})
			require.NoError(t, err)
			value := strings.Repeat("v", 3000)
			write := func(key string) error {
				return db.Update(context.Background(), func(tx store.Tx) error {
					return tx.Put("b", []byte(key), []byte(value))
				})
			}
			var acked []string
			for i := range 50 {
				k := fmt.Sprint("before", i)
				require.NoError(t, write(k))
				acked = append(acked, k)
			}
			// Fill the file system, then write until a write is refused.
			filler, err := os.Create(filepath.Join(dir, "filler"))
			require.NoError(t, err)
			for _, err := filler.Write(make([]byte, 64<<10)); err == nil; _, err = filler.Write(make([]byte, 64<<10)) {
			}
			require.NoError(t, filler.Close())
			var refused string
			for i := range 5000 {
				k := fmt.Sprint("full", i)
				err := write(k)
				if err != nil {
					assert.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
					assert.False(t, errors.Is(err, ErrFailed), "a full disk does not fail the DB: %v", err)
					refused = k
					break
				}
				acked = append(acked, k)
			}
			require.NotEmpty(t, refused, "the disk never filled")
			_, err = get(t, db, refused)
			assert.ErrorIs(t, err, store.ErrNotFound, "the refused write is not in the running DB")

			require.NoError(t, os.Remove(filepath.Join(dir, "filler")))
			require.NoError(t, write("after"), "space freed: writes are stored again, without a reopen")
			acked = append(acked, "after")

			require.NoError(t, db.Close())
			db, err = Open(path, &Options{NoWAL: noWAL})
			require.NoError(t, err)
			defer db.Close()
			for _, k := range acked {
				v, err := get(t, db, k)
				require.NoError(t, err, k)
				assert.Equal(t, value, v, k)
			}
			_, err = get(t, db, refused)
			assert.ErrorIs(t, err, store.ErrNotFound, "the refused write is not there after a reopen")
		})
	}
}
