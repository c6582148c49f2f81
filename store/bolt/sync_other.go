//go:build !linux

package bolt

import "os"

// fdatasync flushes f to disk (fsync where fdatasync is not available).
func fdatasync(f *os.File) error { return f.Sync() }
