//go:build unix

package bolt

import (
	"errors"
	"io/fs"
	"syscall"
)

// noSpace reports whether err is a write (or a growth of the file) that
// the file system refused for want of space: ENOSPC or EDQUOT from
// write(2) or ftruncate(2). Such a write stored nothing in the page cache
// that a later flush could lose, and bbolt, whose pages come before its
// meta page, rolled the commit back without writing that page: the file
// and the running DB still hold the state before the commit, so the
// commit is refused and the DB goes on (a full disk recovers once space
// is freed). A flush that fails, for want of space or not, is not this.
func noSpace(err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "write" && pe.Op != "truncate" {
		return false
	}
	return errors.Is(pe.Err, syscall.ENOSPC) || errors.Is(pe.Err, syscall.EDQUOT)
}
