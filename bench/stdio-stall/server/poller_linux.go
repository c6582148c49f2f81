package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// pollableStdin returns standard input reopened for the runtime's network
// poller: a pipe opened anew from /proc/self/fd/0 with O_NONBLOCK is a file
// description of its own, so the flag does not reach the processes that
// share the original one.
func pollableStdin() (io.ReadCloser, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil, fmt.Errorf("server: -stdin poller needs a pipe on standard input")
	}
	fd, err := syscall.Open("/proc/self/fd/0", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("server: reopening standard input: %w", err)
	}
	// os.NewFile sees O_NONBLOCK and registers fd with the poller.
	return os.NewFile(uintptr(fd), "stdin"), nil
}
