//go:build unix

package regfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/regfile"
)

// TestOpen: a regular file (and a link to one) opens; a FIFO without a
// writer and a directory are refused at once, naming the file; a missing
// file is fs.ErrNotExist.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "doc.txt")
	require.NoError(t, os.WriteFile(file, []byte("hello"), 0o600))
	link := filepath.Join(dir, "link.txt")
	require.NoError(t, os.Symlink(file, link))
	fifo := filepath.Join(dir, "fifo.txt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	for _, p := range []string{file, link} {
		b, err := regfile.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(b))
	}
	for _, p := range []string{fifo, dir} {
		_, err := regfile.Open(p) // returns: it does not wait for a writer
		require.Error(t, err)
		assert.Contains(t, err.Error(), p+" is not a regular file")
	}
	_, err := regfile.Open(filepath.Join(dir, "none"))
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}
