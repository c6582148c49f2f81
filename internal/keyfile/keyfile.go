// Package keyfile reads and creates the small secret files crux keeps in a
// data directory (the receipt signing key, the C2PA root CA): read only
// when they are regular files that group and others cannot access, and
// created once, atomically, so that processes racing to create one all
// end up with the file of whichever created it first.
package keyfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/crux-go/crux/internal/regfile"
)

// Read returns up to limit bytes of the file at path, checking that it is
// a regular file and, when private, that group and others have no access
// to it (except on Windows, where Unix permissions do not apply). A
// missing file is reported with the error of os.Open, which wraps
// fs.ErrNotExist; the other errors name the file.
func Read(path string, limit int64, private bool) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); private && perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%s has permissions %#o: group or others may access it; it must be 0600 (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Create writes content to dir/name, mode 0600, unless the file exists:
// then it fails with an error wrapping fs.ErrExist and leaves the file as
// it is. The content goes to a temporary file in dir, flushed to disk, and
// is hard-linked into place, so that no reader ever sees it half-written;
// on a file system without hard links the file is created with O_EXCL
// instead (a racing reader may then see it half-written). The directory
// is flushed too, so the new file survives a crash.
func Create(dir, name string, content []byte) error {
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeSync(tmp, content); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// No hard links here: create the file exclusively instead.
		f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if ferr != nil {
			if errors.Is(ferr, fs.ErrExist) {
				return ferr
			}
			return fmt.Errorf("%w (link: %v)", ferr, err)
		}
		if err := writeSync(f, content); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// writeSync writes b to f, flushes it to disk and closes f.
func writeSync(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir flushes dir's entries to disk. Windows cannot sync directories;
// there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
