//go:build unix

package regfile

import "syscall"

// nonBlock opens a FIFO without waiting for a writer; on a regular file
// it changes nothing.
const nonBlock = syscall.O_NONBLOCK
