package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/owner"
)

// The shared data directory, end to end: several crux serve and crux call
// processes on one directory, the owner handing over and being killed.

// startServeAs starts crux serve for agent on dir as a subprocess, with an
// MCP client connected over stdio.
func startServeAs(t *testing.T, ctx context.Context, dir, agent string, stderr *syncBuffer) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(cruxBinary(t), "serve", "--data", dir, "--agent", agent)
	cmd.Env = subprocessEnv()
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "shared-" + agent, Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	return cs, cmd
}

// ownerPID is the process id the owner of dir gives in its hello.
func ownerPID(t *testing.T, dir string) int {
	t.Helper()
	conn, err := net.Dial("unix", filepath.Join(dir, owner.SocketName))
	require.NoError(t, err)
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	require.NoError(t, err)
	var hello struct {
		Hello string `json:"hello"`
		PID   int    `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(line, &hello))
	require.NotZero(t, hello.PID)
	return hello.PID
}

// chainValues reads the history of (entity, "k") through cs and checks it
// is one linear chain: versions n down to 1, each superseding the next
// older, exactly one current. It returns the values.
func chainValues(t *testing.T, ctx context.Context, cs *mcp.ClientSession, entity string) []string {
	t.Helper()
	versions := historyOf(t, ctx, cs, entity, "k")
	var values []string
	current := 0
	for i, v := range versions {
		assert.Equal(t, uint32(len(versions)-i), v.Version, "%s: versions newest first, without gaps", entity)
		if i+1 < len(versions) {
			assert.Equal(t, versions[i+1].FactID, v.Supersedes, "%s v%d supersedes the version before it", entity, v.Version)
		}
		if v.SupersededBy == "" {
			current++
		}
		values = append(values, v.Value)
	}
	assert.Equal(t, 1, current, "%s: exactly one current version", entity)
	return values
}

// writer writes store_fact calls through one MCP session until stopped,
// recording what was acknowledged and what failed.
type writer struct {
	agent string
	cs    *mcp.ClientSession
	cmd   *exec.Cmd

	mu     sync.Mutex
	acked  []string      // the values acknowledged
	errs   []writerError // the calls that failed
	ackAt  []time.Time   // when each was acknowledged
	ended  bool          // the session ended
	target bool          // its process was stopped on purpose
}

type writerError struct {
	at  time.Time
	err error
}

func (w *writer) run(ctx context.Context, entities int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		value := fmt.Sprintf("%s-%d", w.agent, i)
		res, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact", Arguments: map[string]any{
			"entity": fmt.Sprintf("shared:%d", i%entities), "key": "k", "value": value}})
		if err == nil && res.IsError {
			err = fmt.Errorf("isError: %+v", res.Content)
		}
		w.mu.Lock()
		if err != nil {
			w.errs = append(w.errs, writerError{time.Now(), err})
			if errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "closed") || ctx.Err() != nil {
				w.ended = true
				w.mu.Unlock()
				return
			}
		} else {
			w.acked = append(w.acked, value)
			w.ackAt = append(w.ackAt, time.Now())
		}
		w.mu.Unlock()
	}
}

func (w *writer) acks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// firstAckAfter is the first acknowledgement after t, if any.
func (w *writer) firstAckAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.ackAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// ownerGone reports whether err is the documented -32603 of a call the
// killed owner had been sent.
func ownerGone(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == -32603 && je.Message == owner.ErrOwnerGone.Error()
}

// Four crux serve processes, each for its own agent, write 250 facts each
// into one data directory, onto the same 25 version chains: all 1,000 are
// stored, every chain is linear, no call fails.
func TestSharedDirFourServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four crux serve processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr syncBuffer
	var ws []*writer
	for i := range 4 {
		cs, cmd := startServeAs(t, ctx, dir, fmt.Sprintf("agent%d", i), &stderr)
		ws = append(ws, &writer{agent: fmt.Sprintf("agent%d", i), cs: cs, cmd: cmd})
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				res, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact", Arguments: map[string]any{
					"entity": fmt.Sprintf("shared:%d", i%25), "key": "k", "value": fmt.Sprintf("%s-%d", w.agent, i)}})
				if err == nil && res.IsError {
					err = fmt.Errorf("isError: %+v", res.Content)
				}
				if !assert.NoError(t, err, "%s call %d", w.agent, i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for e := range 25 {
		for _, v := range chainValues(t, ctx, ws[3].cs, fmt.Sprintf("shared:%d", e)) {
			assert.False(t, seen[v], "%s stored twice", v)
			seen[v] = true
		}
	}
	assert.Len(t, seen, 1000, "every fact stored once")
	for _, w := range ws {
		assert.NoError(t, w.cs.Close(), "stderr: %s", stderr.String())
	}
	assert.NotContains(t, stderr.String(), "level=ERROR")
}

// Eight crux call processes at a time write 100 facts each while a crux
// serve owns the directory: all 800 are stored, none fails.
func TestSharedDirCallsWhileServing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 800 crux call processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr syncBuffer
	cs, _ := startServeAs(t, ctx, dir, "serve", &stderr)
	defer func() { assert.NoError(t, cs.Close(), "stderr: %s", stderr.String()) }()

	bin := cruxBinary(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				args := fmt.Sprintf(`{"entity":"shared:%d","key":"k","value":"call%d-%d"}`, i%20, p, i)
				cmd := exec.CommandContext(ctx, bin, "call", "--data", dir, "--agent", fmt.Sprintf("call%d", p), "store_fact", args)
				cmd.Env = subprocessEnv()
				out, err := cmd.CombinedOutput()
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("call%d-%d: %v: %s", p, i, err, out))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, failures)
	seen := map[string]bool{}
	for e := range 20 {
		for _, v := range chainValues(t, ctx, cs, fmt.Sprintf("shared:%d", e)) {
			seen[v] = true
		}
	}
	assert.Len(t, seen, 800, "every call stored")
}

// The owner hands over three times while five crux serve processes write:
// its client closes standard input (no call fails), then the next owner
// gets SIGTERM (no call fails), then the next one is SIGKILLed (only the
// calls it had been sent fail, with the documented -32603, and the next
// call succeeds on a new owner). Every acknowledged write is stored.
func TestSharedDirHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five crux serve processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr syncBuffer
	const entities = 10
	var ws []*writer
	byPID := map[int]*writer{}
	for i := range 5 {
		cs, cmd := startServeAs(t, ctx, dir, fmt.Sprintf("agent%d", i), &stderr)
		w := &writer{agent: fmt.Sprintf("agent%d", i), cs: cs, cmd: cmd}
		ws = append(ws, w)
		byPID[cmd.Process.Pid] = w
	}
	require.Equal(t, ws[0].cmd.Process.Pid, ownerPID(t, dir), "the first serve owns the directory")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, entities, stop) }()
	}
	// waitAcks waits until every writer still running has n more acks.
	waitAcks := func(n int) {
		t.Helper()
		base := map[*writer]int{}
		for _, w := range ws {
			base[w] = w.acks()
		}
		require.Eventually(t, func() bool {
			for _, w := range ws {
				w.mu.Lock()
				done := w.target || w.ended || len(w.acked) >= base[w]+n
				w.mu.Unlock()
				if !done {
					return false
				}
			}
			return true
		}, time.Minute, 5*time.Millisecond)
	}
	// handOver stops the owner with how, and returns the time it took
	// until every other writer had a call acknowledged again.
	handOver := func(how func(w *writer)) (*writer, time.Duration) {
		t.Helper()
		w := byPID[ownerPID(t, dir)]
		require.NotNil(t, w, "the owner is one of the serves")
		w.mu.Lock()
		w.target = true
		w.mu.Unlock()
		at := time.Now()
		how(w)
		var worst time.Duration
		for _, o := range ws {
			o.mu.Lock()
			skip := o.target
			o.mu.Unlock()
			if skip {
				continue
			}
			require.Eventually(t, func() bool { _, ok := o.firstAckAfter(at); return ok }, 30*time.Second, time.Millisecond)
			first, _ := o.firstAckAfter(at)
			worst = max(worst, first.Sub(at))
		}
		return w, worst
	}

	waitAcks(30)
	w0, closeGap := handOver(func(w *writer) { require.NoError(t, w.cs.Close()) })
	require.Equal(t, ws[0], w0)
	waitAcks(30)
	termed, termGap := handOver(func(w *writer) { require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM)) })
	waitAcks(30)
	killedAt := time.Now()
	killed, killGap := handOver(func(w *writer) { require.NoError(t, w.cmd.Process.Kill()) })
	waitAcks(30)
	close(stop)
	wg.Wait()

	gone := 0
	for _, w := range ws {
		w.mu.Lock()
		for _, e := range w.errs {
			switch {
			case w == w0 || w == termed || w == killed:
				// Its own session ended with its process.
			case ownerGone(e.err) && e.at.After(killedAt):
				gone++
			default:
				t.Errorf("%s: a call failed: %v", w.agent, e.err)
			}
		}
		w.mu.Unlock()
	}
	assert.LessOrEqual(t, gone, 2, "only the calls in flight at the kill fail, one per surviving writer at most")

	// Every acknowledged write is there, once, on linear chains.
	var survivor *writer
	for _, w := range ws {
		if w != w0 && w != termed && w != killed {
			survivor = w
		}
	}
	seen := map[string]bool{}
	for e := range entities {
		for _, v := range chainValues(t, ctx, survivor.cs, fmt.Sprintf("shared:%d", e)) {
			assert.False(t, seen[v], "%s stored twice", v)
			seen[v] = true
		}
	}
	acked := 0
	for _, w := range ws {
		for _, v := range w.acked {
			assert.True(t, seen[v], "acknowledged write %s is stored", v)
			acked++
		}
	}
	for _, w := range ws {
		if w != w0 && w != killed {
			w.cs.Close()
		}
	}
	t.Logf("%d acknowledged writes, all stored; %d calls failed at the kill; first acknowledgement after the hand-over: stdin closed %s, SIGTERM %s, SIGKILL %s",
		acked, gone, closeGap.Round(time.Millisecond), termGap.Round(time.Millisecond), killGap.Round(time.Millisecond))
}
