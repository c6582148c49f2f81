package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestReadBinaryInfo(t *testing.T) {
	assert.Equal(t, binaryInfo{}, readBinaryInfo(nil))
	bi := readBinaryInfo(&debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Path: "github.com/crux-go/crux", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: strings.Repeat("a", 40)}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-02-01T00:00:00Z"}}})
	assert.Equal(t, strings.Repeat("a", 40), bi.revision)
	assert.Equal(t, "v1.2.3", bi.version)
	require.NotNil(t, bi.modified)
	assert.True(t, *bi.modified)
}

// Without a checkout nothing is claimed.
func TestUpdateStatusWithoutCheckout(t *testing.T) {
	st := computeUpdateStatus(context.Background(), binaryInfo{revision: strings.Repeat("b", 40)}, "", updateNow)
	assert.Equal(t, "unknown", st.State)
	assert.Equal(t, "binary", st.Basis)
	assert.Nil(t, st.UpdateAvailable)
	assert.Nil(t, st.LatestCommit)
	assert.Equal(t, strings.Repeat("b", 40), *st.CurrentCommit)

	st = computeUpdateStatus(context.Background(), binaryInfo{}, "", updateNow)
	assert.Equal(t, "none", st.Basis)
	assert.Nil(t, st.BinaryCommit)
	assert.Nil(t, st.CurrentCommit)

	st = computeUpdateStatus(context.Background(), binaryInfo{}, t.TempDir(), updateNow)
	require.NotNil(t, st.Error)
	assert.Contains(t, *st.Error, "not a git checkout")
	assert.Equal(t, "unknown", st.State)
}

// The files of a git directory are read without git: a worktree's gitdir
// file, its commondir, packed refs and the branch's upstream.
func TestReadCheckoutFiles(t *testing.T) {
	root := t.TempDir()
	common := filepath.Join(root, "main.git")
	wt := filepath.Join(common, "worktrees", "w")
	require.NoError(t, os.MkdirAll(wt, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(common, "refs", "heads"), 0o755))
	head, up := strings.Repeat("1", 40), strings.Repeat("2", 40)
	write := func(path, s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o644)) }
	write(filepath.Join(common, "refs", "heads", "dev"), head+"\n")
	write(filepath.Join(common, "packed-refs"), "# pack-refs with: peeled fully-peeled sorted\n"+up+" refs/remotes/origin/dev\n")
	write(filepath.Join(common, "config"), "[core]\n\tbare = false\n[branch \"main\"]\n\tremote = x\n[branch \"dev\"]\n\tremote = origin\n\tmerge = refs/heads/dev\n")
	write(filepath.Join(common, "FETCH_HEAD"), up+"\n")
	write(filepath.Join(wt, "HEAD"), "ref: refs/heads/dev\n")
	write(filepath.Join(wt, "commondir"), "../..\n")
	checkout := filepath.Join(root, "checkout")
	require.NoError(t, os.MkdirAll(checkout, 0o755))
	write(filepath.Join(checkout, ".git"), "gitdir: "+wt+"\n")

	co, err := readCheckout(checkout)
	require.NoError(t, err)
	assert.Equal(t, head, co.head)
	assert.Equal(t, "dev", co.branch)
	assert.Equal(t, "refs/remotes/origin/dev", co.tracking)
	assert.Equal(t, up, co.trackingCommit)
	assert.NotNil(t, co.fetchedAt)

	// Detached HEAD: no tracking branch.
	write(filepath.Join(wt, "HEAD"), head+"\n")
	co, err = readCheckout(checkout)
	require.NoError(t, err)
	assert.Equal(t, head, co.head)
	assert.Empty(t, co.tracking)

	write(filepath.Join(wt, "HEAD"), "ref: refs/heads/../../../etc\n")
	_, err = readCheckout(checkout)
	assert.Error(t, err)
}

// With a real repository, the counts come from the local git.
func TestUpdateStatusCountsWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	upstream := filepath.Join(root, "up")
	require.NoError(t, os.Mkdir(upstream, 0o755))
	git(upstream, "init", "-q", "-b", "main")
	git(upstream, "commit", "-q", "--allow-empty", "-m", "one")
	first := git(upstream, "rev-parse", "HEAD")
	git(upstream, "commit", "-q", "--allow-empty", "-m", "two")
	checkout := filepath.Join(root, "co")
	git(root, "clone", "-q", upstream, checkout)
	second := git(checkout, "rev-parse", "HEAD")
	git(upstream, "commit", "-q", "--allow-empty", "-m", "three")
	git(checkout, "fetch", "-q")

	// A binary built from the first commit: one behind the checkout, two
	// behind what the checkout last fetched.
	st := computeUpdateStatus(context.Background(), binaryInfo{revision: first}, checkout, updateNow)
	require.Nil(t, st.Error)
	assert.Equal(t, "behind", st.State)
	assert.Equal(t, second, *st.CheckoutCommit)
	assert.Equal(t, 1, *st.CheckoutBehindBy)
	assert.Equal(t, 0, *st.CheckoutAheadBy)
	assert.Equal(t, "refs/remotes/origin/main", *st.TrackingRef)
	assert.Equal(t, 2, *st.BehindBy)
	assert.True(t, *st.UpdateAvailable)
	assert.True(t, st.ComparisonStale)
	assert.NotNil(t, st.UpgradeHint)

	// No binary commit: the checkout is the basis.
	st = computeUpdateStatus(context.Background(), binaryInfo{}, checkout, updateNow)
	assert.Equal(t, "checkout", st.Basis)
	assert.Equal(t, 1, *st.BehindBy)
	git(checkout, "merge", "-q", "--ff-only", "origin/main")
	st = computeUpdateStatus(context.Background(), binaryInfo{}, checkout, updateNow)
	assert.Equal(t, "up_to_date", st.State)
	assert.False(t, *st.UpdateAvailable)

	// A binary commit the checkout lacks: counted as unknown, not behind.
	st = computeUpdateStatus(context.Background(), binaryInfo{revision: strings.Repeat("c", 40)}, checkout, updateNow)
	assert.Equal(t, "unknown", st.State)
	assert.Nil(t, st.UpdateAvailable)
}
