//go:build unix

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/owner"
)

// TestSharedDirStoppedOwner: while the process owning a data directory is
// stopped (SIGSTOP), a forwarding process's call fails within the answer
// timeout plus two ping intervals, naming the owner's pid, and its next
// calls fail at once without being sent; a process that starts meanwhile
// says the owner is not answering. After SIGCONT every call succeeds
// again and no acknowledged write is lost.
func TestSharedDirStoppedOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderrA, stderrB syncBuffer
	a, cmdA := startServeAs(t, ctx, dir, "alice", &stderrA)
	defer a.Close()
	b, _ := startServeAs(t, ctx, dir, "bob", &stderrB)
	defer b.Close()
	pid := ownerPID(t, dir)
	require.Equal(t, cmdA.Process.Pid, pid, "the first serve owns the directory")

	store := func(v string) error {
		res, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact",
			Arguments: map[string]any{"entity": "e", "key": "k", "value": v}})
		if err == nil && res.IsError {
			err = fmt.Errorf("isError: %v", res.Content)
		}
		return err
	}
	require.NoError(t, store("before"))

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	start := time.Now()
	err := store("while stopped")
	waited := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("the process owning %s (pid %d) has not answered for", dir, pid))
	assert.Contains(t, err.Error(), "it may or may not be applied when that process resumes")
	bound := owner.DefaultAnswerTimeout + 2*owner.DefaultAnswerTimeout/5
	assert.Less(t, waited, bound+5*time.Second, "failed within the documented bound (and slack for a loaded machine)")

	err = store("not sent")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the call was not sent: nothing of it is applied")

	call := exec.CommandContext(ctx, cruxBinary(t), "call", "--data", dir, "--agent", "carol", "list_entities", `{}`)
	call.Env = subprocessEnv()
	out, err := call.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("(pid %d) has not answered", pid))
	assert.NotContains(t, string(out), "does not share it")

	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	stopped = false
	var after error
	for range 50 { // the next pong clears the silence within a ping interval
		if after = store("after"); after == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, after)
	values := chainValues(t, ctx, a, "e")
	assert.Contains(t, values, "before")
	assert.Contains(t, values, "after")
	assert.NotContains(t, values, "not sent")
	t.Logf("the call to a stopped owner failed after %s; values after SIGCONT: %s", waited.Round(100*time.Millisecond), strings.Join(values, ", "))
}
