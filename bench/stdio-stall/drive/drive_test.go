package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeOneAtATime runs the benchmark's stream against crux serve as
// built normally, for a fixed budget of three seconds with frequent
// garbage collections: every reply arrives, none is an error, and none
// takes more than a second. run.sh runs the same stream against a runtime
// built to lose the race described in the mcpserver package documentation.
func TestServeOneAtATime(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH; cannot build crux")
	}
	bin := filepath.Join(t.TempDir(), "crux")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/crux-go/crux/cmd/crux").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--agent", "drive")
	cmd.Env = append(os.Environ(), "GOGC=5")
	rep, err := drive(ctx, cmd, config{Calls: 1 << 30, Duration: 3 * time.Second, Stall: time.Second, GiveUp: 10 * time.Second})
	t.Log(rep.summary())
	require.NoError(t, err)
	assert.Positive(t, rep.Calls)
	assert.Len(t, rep.Latency, rep.Calls)
	assert.Empty(t, rep.Stalls, "replies that took more than a second")
	assert.Zero(t, rep.Errors, "replies that were errors")
}
