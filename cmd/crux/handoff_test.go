package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// cruxProc runs `crux call` as a separate process and returns its exit code
// and decoded output.
func cruxProc(t *testing.T, dir, agent, tool, args string) (int, callOut) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cruxBinary(t), "call", "--data", dir, "--agent", agent, tool, args)
	cmd.Env = subprocessEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err, "stderr: %s", stderr.String())
	}
	return code, decodeCall(t, string(stdout))
}

func packageArgs(t *testing.T, pkg string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"package": pkg})
	require.NoError(t, err)
	return string(b)
}

// TestHandoffAcrossProcesses creates a handoff in one crux process and
// accepts it in later, separate processes: the package is verified with the
// data directory's signing key, reloaded by each process. One changed byte
// is refused and loads nothing.
func TestHandoffAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	code, out := cruxProc(t, dir, "alice", "save_session", `{"session_id":"s1","state":{"title":"port","plan":"alpha"}}`)
	require.Equal(t, exitOK, code)
	require.Nil(t, out.Error)

	code, out = cruxProc(t, dir, "alice", "create_handoff", `{"session_id":"s1","target_agent":"bob","message":"yours"}`)
	require.Equal(t, exitOK, code)
	require.Nil(t, out.Error)
	require.Nil(t, out.IsError)
	pkg := out.StructuredContent["package_json"].(string)

	// One byte changed: refused, nothing loaded.
	tampered := strings.Replace(pkg, "alpha", "alphb", 1)
	require.NotEqual(t, pkg, tampered)
	code, out = cruxProc(t, dir, "bob", "accept_handoff", packageArgs(t, tampered))
	assert.Equal(t, exitFailure, code)
	require.NotNil(t, out.Error)
	assert.Equal(t, crux.CodeInvalidParams, out.Error.Code)
	assert.Contains(t, out.Error.Message, "content hash mismatch")
	code, out = cruxProc(t, dir, "bob", "get_session", `{"session_id":"s1"}`)
	assert.Equal(t, exitOK, code)
	require.NotNil(t, out.IsError, "nothing loaded")
	assert.True(t, *out.IsError)

	// Not the target agent: refused.
	code, out = cruxProc(t, dir, "carol", "accept_handoff", packageArgs(t, pkg))
	assert.Equal(t, exitFailure, code)
	require.NotNil(t, out.Error)
	assert.Equal(t, crux.CodeCapabilityDenied, out.Error.Code)

	// The genuine package, in a new process: accepted.
	code, out = cruxProc(t, dir, "bob", "accept_handoff", packageArgs(t, pkg))
	require.Equal(t, exitOK, code, "%+v", out.Error)
	require.Nil(t, out.IsError)
	assert.Equal(t, true, out.StructuredContent["verified"])
	assert.Equal(t, true, out.StructuredContent["session_loaded"])

	code, out = cruxProc(t, dir, "bob", "get_session", `{"session_id":"s1"}`)
	require.Equal(t, exitOK, code)
	require.Nil(t, out.IsError)
	assert.Equal(t, map[string]any{"title": "port", "plan": "alpha"}, out.StructuredContent["state"])

	// Once only, also across processes.
	code, out = cruxProc(t, dir, "bob", "accept_handoff", packageArgs(t, pkg))
	assert.Equal(t, exitFailure, code)
	require.NotNil(t, out.Error)
	assert.Contains(t, out.Error.Message, "already accepted")
}
