//go:build !linux

package bolt

// residentFileBytes returns 0: the resident pages of mapped files are
// read on Linux only, so the map is never trimmed elsewhere.
func residentFileBytes() int64 { return 0 }

// dropMapped does nothing where the resident pages are not read.
func dropMapped(addr uintptr, size int) {}
