//go:build unix

package owner

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxSunPath is the longest socket path every Unix takes (sun_path is 104
// bytes on the BSDs and macOS, 108 on Linux, NUL included).
const maxSunPath = 103

// listenUnix listens on a Unix socket at path with mode 0600, removing a
// file already there (a dead owner's socket: the caller holds the store).
func listenUnix(path string) (*net.UnixListener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var ln *net.UnixListener
	err := withAddr(path, func(addr string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, err
	}
	// The data directory is 0700, so the moment between the bind and the
	// chmod exposes nothing; the chmod keeps the socket private even in a
	// directory that is not.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// dialUnix connects to the Unix socket at path.
func dialUnix(path string) (*net.UnixConn, error) {
	var conn *net.UnixConn
	err := withAddr(path, func(addr string) error {
		var err error
		conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	return conn, err
}

// withAddr runs fn with an address for the socket at path: path itself,
// or, when it is too long for a socket address, a path through an open
// descriptor of its directory (Linux's /proc/self/fd).
func withAddr(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return fmt.Errorf("the socket path %s is longer than %d bytes: use a data directory with a shorter path", path, maxSunPath)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	addr := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path)
	if len(addr) > maxSunPath {
		return fmt.Errorf("the socket name %s is too long", filepath.Base(path))
	}
	return fn(addr)
}

// checkSocket checks, before connecting, that the file at path is a socket
// owned by this process's user that no one else may access.
func checkSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return &untrustedError{path: path, why: fmt.Sprintf("it is not a socket (mode %s)", fi.Mode())}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &untrustedError{path: path, why: fmt.Sprintf("it belongs to user id %d, not %d", st.Uid, os.Geteuid())}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &untrustedError{path: path, why: fmt.Sprintf("its mode %#o lets group or others connect; it must be 0600", perm)}
	}
	return nil
}

// untrustedError says why the socket at path is not used.
type untrustedError struct{ path, why string }

func (e *untrustedError) Error() string {
	return fmt.Sprintf("owner: not using the socket %s: %s", e.path, e.why)
}
