package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/crux-go/crux/toolkit"
)

// update_status: which commit this binary runs, and how it stands against
// a source checkout, from what is on disk.
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - The binary's commit comes from its build information (module
//     version, vcs.revision, vcs.time, vcs.modified), which go build
//     stamps when it builds inside a repository; go test and builds
//     outside one have none, and the tool says so.
//   - crux makes no network call to look for updates. With a checkout
//     configured (Options.Checkout; the crux command reads
//     CRUX_UPDATE_CHECKOUT), it reads the checkout's HEAD and the
//     remote-tracking branch of its branch straight from .git (loose refs,
//     packed-refs, worktrees), as of the checkout's last fetch, whose time
//     it reports. Commit counts (ahead_by, behind_by) need the history,
//     which crux asks of a local git (git rev-list, never git fetch) when
//     one is on PATH; without it the counts are null.
//   - state is up_to_date, behind, ahead, diverged or unknown; it is never
//     behind unless the counts say so. comparison_stale is always true when
//     a tracking ref is compared: crux cannot know what the remote holds
//     now.

// UpdateStatusOutput is what update_status returns.
type UpdateStatusOutput struct {
	Enabled          bool     `json:"enabled"`
	State            string   `json:"state"`
	Basis            string   `json:"basis"`
	UpdateAvailable  *bool    `json:"update_available"`
	ModulePath       string   `json:"module_path,omitempty"`
	ModuleVersion    string   `json:"module_version,omitempty"`
	GoVersion        string   `json:"go_version"`
	BinaryCommit     *string  `json:"binary_commit"`
	BinaryCommitTime *string  `json:"binary_commit_time"`
	BinaryModified   *bool    `json:"binary_modified"`
	CurrentCommit    *string  `json:"current_commit"`
	CheckoutPath     string   `json:"checkout_path,omitempty"`
	CheckoutCommit   *string  `json:"checkout_commit"`
	CheckoutBranch   string   `json:"checkout_branch,omitempty"`
	CheckoutAheadBy  *int     `json:"checkout_ahead_by"`
	CheckoutBehindBy *int     `json:"checkout_behind_by"`
	TrackingRef      *string  `json:"tracking_ref"`
	LatestCommit     *string  `json:"latest_commit"`
	LatestFetchedAt  *string  `json:"latest_fetched_at"`
	AheadBy          *int     `json:"ahead_by"`
	BehindBy         *int     `json:"behind_by"`
	ComparisonStale  bool     `json:"comparison_stale"`
	CheckedAt        string   `json:"checked_at"`
	Error            *string  `json:"error"`
	UpgradeHint      *string  `json:"upgrade_hint"`
	Notes            []string `json:"notes"`
}

// binaryInfo is what update_status reads of a binary's build information.
type binaryInfo struct {
	path, version, goVersion string
	revision, vcsTime        string
	modified                 *bool
}

// readBinaryInfo reads bi, which may be nil (no build information).
func readBinaryInfo(bi *debug.BuildInfo) binaryInfo {
	var out binaryInfo
	if bi == nil {
		return out
	}
	out.path, out.version, out.goVersion = bi.Main.Path, bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.revision = s.Value
		case "vcs.time":
			out.vcsTime = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			out.modified = &m
		}
	}
	return out
}

func (d *Deps) updateStatusTool() *toolkit.Tool {
	const name = "update_status"
	return &toolkit.Tool{
		Name:        name,
		Description: "The commit this binary was built from, and how it stands against a configured checkout.",
		Annotations: toolkit.Annotations{Title: "Update status", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[UpdateStatusOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, _ toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			bi, _ := debug.ReadBuildInfo()
			return toolkit.JSONResult(computeUpdateStatus(ctx, readBinaryInfo(bi), d.Checkout, env.Time()))
		}),
	}
}

// computeUpdateStatus is update_status for a binary and a checkout ("" for
// none) at now.
func computeUpdateStatus(ctx context.Context, bin binaryInfo, checkout string, now time.Time) UpdateStatusOutput {
	st := binaryStatus(bin, now)
	if checkout == "" {
		st.CurrentCommit = st.BinaryCommit
		st.Notes = append(st.Notes, "no source checkout is configured (CRUX_UPDATE_CHECKOUT): crux cannot tell whether an update exists, and makes no network call to find out")
		return st
	}
	st.CheckoutPath = checkout
	co, err := readCheckout(checkout)
	if err != nil {
		msg := err.Error()
		st.Error = &msg
		st.CurrentCommit = st.BinaryCommit
		return st
	}
	st.CheckoutCommit, st.CheckoutBranch = &co.head, co.branch
	if st.BinaryCommit == nil {
		st.Basis = "checkout"
		st.CurrentCommit = st.CheckoutCommit
	} else {
		st.CurrentCommit = st.BinaryCommit
	}
	git, gitErr := exec.LookPath("git")
	count := func(a, b string) (ahead, behind *int, err error) {
		if a == b {
			zero := 0
			return &zero, &zero, nil
		}
		if !commitHex.MatchString(a) || !commitHex.MatchString(b) {
			return nil, nil, errors.New("not two commit ids to count between")
		}
		if gitErr != nil {
			return nil, nil, errors.New("no git on PATH to count commits")
		}
		return revListCount(ctx, git, checkout, a, b)
	}
	if st.BinaryCommit != nil {
		a, b, err := count(*st.BinaryCommit, co.head)
		if err != nil {
			st.Notes = append(st.Notes, "binary against checkout: "+err.Error())
		}
		// The binary is behind the checkout when the checkout has commits the binary lacks.
		st.CheckoutBehindBy, st.CheckoutAheadBy = b, a
	}
	if co.tracking == "" {
		st.Notes = append(st.Notes, "the checkout's branch has no remote-tracking branch: nothing to compare with")
		return st
	}
	st.TrackingRef, st.LatestCommit = &co.tracking, &co.trackingCommit
	st.ComparisonStale = true
	if co.fetchedAt != nil {
		t := co.fetchedAt.UTC().Format(time.RFC3339)
		st.LatestFetchedAt = &t
		st.Notes = append(st.Notes, "latest_commit is "+co.tracking+" as of the checkout's last fetch ("+t+"); crux does not fetch")
	} else {
		st.Notes = append(st.Notes, "latest_commit is "+co.tracking+" as of the checkout's last fetch, whose time is unknown; crux does not fetch")
	}
	ahead, behind, err := count(*st.CurrentCommit, co.trackingCommit)
	if err != nil {
		st.Notes = append(st.Notes, "current against tracking ref: "+err.Error())
		return st
	}
	st.setComparison(ahead, behind, co.tracking, checkout)
	return st
}

// binaryStatus is the status known from the binary alone: its module,
// Go version and, when it was stamped with one, the commit it was built
// from.
func binaryStatus(bin binaryInfo, now time.Time) UpdateStatusOutput {
	st := UpdateStatusOutput{Enabled: true, State: "unknown", Basis: "none", ModulePath: bin.path, ModuleVersion: bin.version,
		GoVersion: bin.goVersion, BinaryModified: bin.modified, CheckedAt: now.Format(time.RFC3339Nano), Notes: []string{}}
	if bin.revision != "" {
		st.BinaryCommit, st.Basis = &bin.revision, "binary"
		if bin.vcsTime != "" {
			st.BinaryCommitTime = &bin.vcsTime
		}
		if bin.modified != nil && *bin.modified {
			st.Notes = append(st.Notes, "the binary was built from a working tree with uncommitted changes (vcs.modified)")
		}
	} else {
		st.Notes = append(st.Notes, "the binary carries no vcs revision (built by go test, outside a repository, or with -buildvcs=false)")
	}
	return st
}

// setComparison sets the state of the current commit against the
// tracking ref from how many commits each has that the other lacks, and
// the hint to pull in checkout when the current commit is behind.
func (st *UpdateStatusOutput) setComparison(ahead, behind *int, tracking, checkout string) {
	st.AheadBy, st.BehindBy = ahead, behind
	available := *behind > 0
	st.UpdateAvailable = &available
	switch {
	case *ahead == 0 && *behind == 0:
		st.State = "up_to_date"
	case *ahead == 0:
		st.State = "behind"
	case *behind == 0:
		st.State = "ahead"
	default:
		st.State = "diverged"
	}
	if available {
		hint := fmt.Sprintf("%s has %d commit(s) this %s lacks: pull in %s and rebuild (go install ./cmd/crux)",
			tracking, *behind, st.Basis, checkout)
		st.UpgradeHint = &hint
	}
}

// checkoutInfo is what update_status reads of a checkout's .git.
type checkoutInfo struct {
	head, branch             string
	tracking, trackingCommit string
	fetchedAt                *time.Time
}

var commitHex = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// readCheckout reads the checkout at dir: its HEAD commit and branch, and
// the branch's remote-tracking ref, from the files of its git directory.
func readCheckout(dir string) (checkoutInfo, error) {
	var co checkoutInfo
	gitDir := filepath.Join(dir, ".git")
	fi, err := os.Stat(gitDir)
	if err != nil {
		return co, fmt.Errorf("%s is not a git checkout: %w", dir, err)
	}
	if !fi.IsDir() { // a worktree or submodule: "gitdir: PATH"
		b, err := readSmall(gitDir)
		if err != nil {
			return co, err
		}
		p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return co, fmt.Errorf("%s does not name a git directory", gitDir)
		}
		gitDir = strings.TrimSpace(p)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	}
	common := gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	head, err := readSmall(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return co, fmt.Errorf("reading HEAD: %w", err)
	}
	h := strings.TrimSpace(string(head))
	if ref, ok := strings.CutPrefix(h, "ref:"); ok {
		ref = strings.TrimSpace(ref)
		co.branch = strings.TrimPrefix(ref, "refs/heads/")
		if co.head, err = resolveRef(gitDir, common, ref); err != nil {
			return co, err
		}
	} else if commitHex.MatchString(h) {
		co.head = h
	} else {
		return co, errors.New("HEAD is neither a ref nor a commit")
	}
	if co.branch == "" {
		return co, nil // detached: no tracking branch
	}
	remote, merge := branchUpstream(filepath.Join(common, "config"), co.branch)
	if remote == "" || merge == "" {
		return co, nil
	}
	co.tracking = "refs/remotes/" + remote + "/" + strings.TrimPrefix(merge, "refs/heads/")
	if co.trackingCommit, err = resolveRef(gitDir, common, co.tracking); err != nil {
		co.tracking = ""
		return co, nil
	}
	if fi, err := os.Stat(filepath.Join(common, "FETCH_HEAD")); err == nil {
		t := fi.ModTime()
		co.fetchedAt = &t
	}
	return co, nil
}

// readSmall reads a file of a git directory, at most 64 KiB of it.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, err
	}
	return b[:n], nil
}

// resolveRef returns the commit ref names: a loose ref of gitDir or of
// common, or a line of packed-refs, following symbolic refs a few times.
func resolveRef(gitDir, common, ref string) (string, error) {
	for range 5 {
		if strings.Contains(ref, "..") {
			return "", fmt.Errorf("ref %q is not a ref name", ref)
		}
		var b []byte
		var err error
		for _, d := range []string{gitDir, common} {
			if b, err = readSmall(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
				break
			}
		}
		if err == nil {
			v := strings.TrimSpace(string(b))
			if next, ok := strings.CutPrefix(v, "ref:"); ok {
				ref = strings.TrimSpace(next)
				continue
			}
			if commitHex.MatchString(v) {
				return v, nil
			}
			return "", fmt.Errorf("ref %s holds no commit", ref)
		}
		packed, perr := os.ReadFile(filepath.Join(common, "packed-refs"))
		if perr == nil {
			for line := range bytes.Lines(packed) {
				id, name, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
				if ok && name == ref && commitHex.MatchString(id) {
					return id, nil
				}
			}
		}
		return "", fmt.Errorf("ref %s is not in the checkout", ref)
	}
	return "", fmt.Errorf("ref %s: too many symbolic refs", ref)
}

// branchUpstream reads branch's remote and merge ref from a git config
// file: [branch "NAME"] remote = ..., merge = ....
func branchUpstream(config, branch string) (remote, merge string) {
	f, err := os.Open(config)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = line == `[branch "`+branch+`"]`
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "remote":
			remote = strings.TrimSpace(v)
		case "merge":
			merge = strings.TrimSpace(v)
		}
	}
	return remote, merge
}

// revListCount asks the local git how many commits a has that b lacks
// (ahead) and b has that a lacks (behind). It never contacts a remote.
func revListCount(ctx context.Context, git, dir, a, b string) (ahead, behind *int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "-C", dir, "rev-list", "--left-right", "--count", a+"..."+b)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("git rev-list could not compare %.12s with %.12s (a commit the checkout lacks?)", a, b)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		return nil, nil, fmt.Errorf("git rev-list answered %q", out)
	}
	x, err1 := strconv.Atoi(fields[0])
	y, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil {
		return nil, nil, fmt.Errorf("git rev-list answered %q", out)
	}
	return &x, &y, nil
}
