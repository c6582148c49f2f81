//go:build !unix

package regfile

// nonBlock is 0 where opens do not block on a FIFO's writer.
const nonBlock = 0
