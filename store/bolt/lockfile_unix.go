//go:build unix

package bolt

import (
	"errors"
	"os"
	"syscall"
	"time"
)

var errLockTimeout = errors.New("lock timeout")

// lockFile opens (creating it, mode 0600) and flocks the file at path,
// exclusively or shared, retrying until timeout.
func lockFile(path string, exclusive bool, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errLockTimeout
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unlockFile releases a lock taken by lockFile.
func unlockFile(f *os.File) {
	if f != nil {
		f.Close() // closing the descriptor releases the flock
	}
}
