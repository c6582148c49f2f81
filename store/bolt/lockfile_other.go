//go:build !unix

package bolt

import (
	"errors"
	"os"
	"time"
)

var errLockTimeout = errors.New("lock timeout")

// lockFile takes no lock where flock is not available: bbolt's own lock on
// the database file is then the only one, and a process that waits on it
// while Compact replaces the file may end up with the old file.
func lockFile(string, bool, time.Duration) (*os.File, error) { return nil, nil }

func unlockFile(*os.File) {}
