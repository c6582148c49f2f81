//go:build unix

package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFileCommandsRefuseAFIFO: a FIFO with no writer (or any file that is
// not a regular one) is refused at once by the commands that read files,
// naming it, instead of blocking in open(2) beyond any signal's reach.
func TestFileCommandsRefuseAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "notes.txt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, args := range [][]string{
		{"ingest", "--data", dir, fifo},
		{"import", "--data", dir, fifo},
		{"import", "--data", dir, "--from", "mcp-memory", fifo},
		{"verify", "bundle", fifo},
	} {
		done := make(chan result, 1)
		go func() { done <- runCrux(t, nil, "", args...) }()
		select {
		case r := <-done:
			assert.Equal(t, exitFailure, r.code, "%v: %s", args, r.stdout)
			assert.Contains(t, r.stderr, fifo+" is not a regular file", args)
		case <-time.After(30 * time.Second):
			t.Fatalf("%v blocked on a FIFO with no writer", args)
		}
	}
}
