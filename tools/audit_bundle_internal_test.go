package tools

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdmitBundle: the export directory keeps at most so many bundles and
// bytes, refusing past either bound; bundles past their retention and
// stale temporary files are removed; other files are left alone and not
// counted.
func TestAdmitBundle(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	lim := exportLimits{retention: 24 * time.Hour, bundles: 3, bytes: 100}
	put := func(name string, size int, age time.Duration) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, make([]byte, size), 0o600))
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
		return p
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	assert.NoError(t, admitBundle(filepath.Join(dir, "none-yet"), 10, now, lim), "a directory not made yet holds nothing")
	put("audit-a.tar.zst", 30, 2*time.Hour)
	put("audit-b.tar.zst", 30, time.Hour)
	put("notes.txt", 500, 48*time.Hour) // not a bundle: never counted nor removed
	assert.NoError(t, admitBundle(dir, 40, now, lim))
	err := admitBundle(dir, 41, now, lim)
	require.Error(t, err, "60 bytes held + 41 > 100")
	assert.Contains(t, err.Error(), "holds 2 bundles (60 bytes); with this one (41 bytes) it would pass its bounds of 3 bundles and 100 bytes")
	assert.Contains(t, err.Error(), "the oldest here at 2026-03-11T10:00:00Z")

	put("audit-c.tar.zst", 1, 0)
	assert.ErrorContains(t, admitBundle(dir, 1, now, lim), "holds 3 bundles", "the count bound")

	// A day later the two older bundles and a stale temporary file go;
	// the young temporary file of an export under way stays.
	old := put("audit-old.tar.zst", 1, 25*time.Hour)
	stale := put(".audit-1.tmp", 1, 2*time.Hour)
	fresh := put(".audit-2.tmp", 1, -23*time.Hour+time.Minute) // a minute before later
	later := now.Add(23 * time.Hour)
	assert.NoError(t, admitBundle(dir, 1, later, lim))
	assert.False(t, exists(old))
	assert.False(t, exists(filepath.Join(dir, "audit-a.tar.zst")))
	assert.False(t, exists(filepath.Join(dir, "audit-b.tar.zst")))
	assert.True(t, exists(filepath.Join(dir, "audit-c.tar.zst")))
	assert.False(t, exists(stale))
	assert.True(t, exists(fresh))
	assert.True(t, exists(filepath.Join(dir, "notes.txt")))
}
