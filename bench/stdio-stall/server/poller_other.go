//go:build !linux

package main

import (
	"errors"
	"io"
)

// pollableStdin is Linux only: it reopens standard input from /proc.
func pollableStdin() (io.ReadCloser, error) {
	return nil, errors.New("server: -stdin poller is supported on Linux only")
}
