// Package regfile opens the files crux reads by path (documents to ingest,
// files to import or verify, keys, token tables) as regular files only.
// A FIFO with no writer, a device or a directory is refused at once, with
// an error naming it, instead of blocking the command in open(2) where no
// signal can stop it.
package regfile

import (
	"fmt"
	"io"
	"os"
)

// Open opens path for reading when it is a regular file (a symbolic link
// to one too). Where the system has non-blocking opens, the file is
// opened without waiting for a FIFO's writer, then checked with fstat, so
// that a file swapped for a FIFO meanwhile is refused as well. A missing
// file is reported with the error of os.Open, which wraps fs.ErrNotExist.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (mode %s)", path, fi.Mode())
	}
	return f, nil
}

// ReadFile is os.ReadFile for a regular file only (see Open).
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
