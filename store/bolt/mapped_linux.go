package bolt

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// residentFileBytes returns how much of the process's resident memory is
// pages of mapped files (the "shared" field of /proc/self/statm: the
// database files' maps, and the program's own text), or 0 if it cannot
// tell.
func residentFileBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0
	}
	n, err := strconv.ParseInt(string(f[2]), 10, 64)
	if err != nil {
		return 0
	}
	return n * int64(os.Getpagesize())
}

// dropMapped drops the process's page table entries for the size bytes
// of bbolt's read-only shared map at addr (madvise MADV_DONTNEED): the
// file's pages stay in the page cache, and a later read of one maps it
// again, at the cost of a minor fault. The caller holds a read
// transaction, which keeps bbolt from unmapping or moving the map.
func dropMapped(addr uintptr, size int) {
	if size <= 0 {
		return
	}
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, addr, uintptr(size), unix.MADV_DONTNEED)
}
