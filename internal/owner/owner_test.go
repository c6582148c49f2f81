//go:build unix

package owner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errBusy is the Open error of a fakeHost whose lock another holds.
var errBusy = errors.New("busy")

// fakeHost is a Host over a counter, locked with flock(2) on a file of the
// data directory, as a real store is: a second Open fails with errBusy
// until the first host is closed (or its process dies).
type fakeHost struct {
	name string
	lock *os.File
	hold chan struct{} // "hold" operations wait until it is closed
	st   *state

	mu     sync.Mutex
	closed bool
}

// state is shared by every fakeHost of one data directory: the requests
// run and the release of held operations.
type state struct {
	mu   sync.Mutex
	ran  []string
	hold chan struct{}
}

func (s *state) record(req string) {
	s.mu.Lock()
	s.ran = append(s.ran, req)
	s.mu.Unlock()
}

func (s *state) runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ran...)
}

// opener returns an Options.Open for dir whose hosts record into st.
func opener(dir, name string, st *state) func() (Host, error) {
	return func() (Host, error) {
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, errBusy
		}
		return &fakeHost{name: name, lock: f, hold: st.hold, st: st}, nil
	}
}

func (h *fakeHost) Handle(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error) {
	switch op {
	case "echo":
		h.st.record(string(req))
		return json.Marshal(map[string]string{"by": h.name, "req": string(req)})
	case "hold":
		h.st.record(string(req))
		<-h.hold
		return json.RawMessage(`"held"`), nil
	case "fail":
		return nil, &Error{Code: -32602, Message: "bad", Data: json.RawMessage(`{"param":"x"}`)}
	case "plain":
		return nil, errors.New("plain failure")
	case "multiline":
		return json.RawMessage("[1,\n 2]"), nil
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

func (h *fakeHost) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("closed twice")
	}
	h.closed = true
	return h.lock.Close()
}

// options are the Options of the process called name on dir.
func options(dir, name string, st *state) Options {
	return Options{
		Open:        opener(dir, name, st),
		Busy:        func(err error) bool { return errors.Is(err, errBusy) },
		JoinTimeout: 2 * time.Second,
	}
}

// join joins dir as the process called name.
func join(t *testing.T, dir, name string, st *state) *Conn {
	t.Helper()
	c, err := Join(context.Background(), dir, options(dir, name, st))
	require.NoError(t, err)
	return c
}

// by returns the host name an echo answer names.
func by(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var m map[string]string
	require.NoError(t, json.Unmarshal(res, &m), string(res))
	return m["by"]
}

func newState() *state { return &state{hold: make(chan struct{})} }

// hold starts a "hold" operation through c and waits until the owner runs
// it. The channel gets its outcome once st.hold is closed: nil for the
// answer "held".
func hold(t *testing.T, c *Conn, st *state) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() {
		res, err := c.Do(context.Background(), "hold", json.RawMessage(`"h"`))
		if err == nil && string(res) != `"held"` {
			err = fmt.Errorf("answer %s", res)
		}
		held <- err
	}()
	require.Eventually(t, func() bool { return len(st.runs()) == 1 }, 5*time.Second, time.Millisecond)
	return held
}

func TestFirstOwnsOthersForward(t *testing.T) {
	dir, st := t.TempDir(), newState()
	a := join(t, dir, "a", st)
	defer a.Close()
	b := join(t, dir, "b", st)
	defer b.Close()
	assert.True(t, a.Owner())
	assert.False(t, b.Owner())

	ctx := context.Background()
	ra, err := a.Do(ctx, "echo", json.RawMessage(`{"n":1}`))
	require.NoError(t, err)
	rb, err := b.Do(ctx, "echo", json.RawMessage(`{"n":1}`))
	require.NoError(t, err)
	assert.Equal(t, string(ra), string(rb), "a forwarded answer is the owner's, byte for byte")
	assert.Equal(t, "a", by(t, rb))

	// Errors keep code, message and data; an error without a code keeps
	// its text.
	for _, c := range []*Conn{a, b} {
		_, err := c.Do(ctx, "fail", nil)
		var we *Error
		require.ErrorAs(t, err, &we)
		assert.Equal(t, &Error{Code: -32602, Message: "bad", Data: json.RawMessage(`{"param":"x"}`)}, we)
		_, err = c.Do(ctx, "plain", nil)
		require.ErrorAs(t, err, &we)
		assert.Equal(t, &Error{Message: "plain failure"}, we)
	}

	// The owner's own process may use its host directly; a forwarding one
	// may not.
	var seen Host
	local, err := a.Local(func(h Host) error { seen = h; return nil })
	require.NoError(t, err)
	assert.True(t, local)
	assert.Equal(t, "a", seen.(*fakeHost).name)
	local, err = b.Local(func(Host) error { t.Error("ran in a forwarding process"); return nil })
	require.NoError(t, err)
	assert.False(t, local)

	// An answer spanning lines is sent re-encoded on one.
	res, err := b.Do(ctx, "multiline", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `[1,2]`, string(res))

	fi, err := os.Lstat(filepath.Join(dir, SocketName))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// The framing of a result reads back what it wrote, and nothing else.
func TestResultFraming(t *testing.T) {
	for _, res := range []string{`{}`, `"x"`, `{"a":{"res":1},"b":"}"}`, `null`} {
		line := appendResult(nil, 42, json.RawMessage(res))
		require.Equal(t, byte('\n'), line[len(line)-1])
		id, got, ok := parseResult(line[:len(line)-1])
		require.True(t, ok, res)
		assert.EqualValues(t, 42, id)
		assert.Equal(t, res, string(got))
	}
	for _, line := range []string{`{"id":3,"err":{"code":1,"message":"m"}}`, `{"hello":"crux-owner/1","pid":1}`, `{"bye":true}`,
		`{"id":x,"res":1}`, `{"id":0,"res":1}`, `{"id":3,"res":1`} {
		_, _, ok := parseResult([]byte(line))
		assert.False(t, ok, line)
	}
}

// The owner closes while a forwarded operation runs and others wait to be
// sent: the running one is answered, the rest go to the next owner, which
// is the forwarding process itself; none fails and none runs twice.
func TestHandOverLosesNothing(t *testing.T) {
	dir, st := t.TempDir(), newState()
	a := join(t, dir, "a", st)
	b := join(t, dir, "b", st)
	defer b.Close()
	ctx := context.Background()

	held := hold(t, b, st)

	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	// While a hands over (it waits for the held operation), b keeps
	// sending: each is either answered by a before its goodbye, or sent
	// again to the next owner.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.Do(ctx, "echo", json.RawMessage(fmt.Sprintf(`"e%d"`, i)))
			errs <- err
		}()
		if i == 10 {
			close(st.hold)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, <-held)
	require.NoError(t, <-closed)
	// Whatever a answered before its goodbye, the next operation finds no
	// owner but b itself.
	res, err := b.Do(ctx, "echo", json.RawMessage(`"after"`))
	require.NoError(t, err)
	assert.Equal(t, "b", by(t, res))
	assert.True(t, b.Owner(), "b took over")

	runs := st.runs()
	assert.Len(t, runs, 42, "every operation ran once: %v", runs)
	seen := map[string]int{}
	for _, r := range runs {
		seen[r]++
	}
	for r, n := range seen {
		assert.Equal(t, 1, n, "%s ran %d times", r, n)
	}
}

// kill ends the owner as a SIGKILL would: its connections end without a
// goodbye and its lock is released.
func kill(t *testing.T, c *Conn) {
	t.Helper()
	c.mu.Lock()
	o := c.own
	c.own, c.closed = nil, true
	c.mu.Unlock()
	require.NotNil(t, o)
	o.mu.Lock()
	o.closing = true
	for sc := range o.conns {
		sc.conn.Close()
	}
	o.mu.Unlock()
	o.ln.Close()
	require.NoError(t, o.host.Close())
}

func TestOwnerKilled(t *testing.T) {
	dir, st := t.TempDir(), newState()
	a := join(t, dir, "a", st)
	b := join(t, dir, "b", st)
	defer b.Close()
	ctx := context.Background()

	held := hold(t, b, st)
	kill(t, a)
	err := <-held
	assert.ErrorIs(t, err, ErrOwnerGone)
	assert.Equal(t, "the owning process ended; the call may or may not have been applied", err.Error())

	start := time.Now()
	res, err := b.Do(ctx, "echo", json.RawMessage(`"after"`))
	require.NoError(t, err)
	assert.Equal(t, "b", by(t, res), "the next operation runs on a new owner")
	assert.Less(t, time.Since(start), time.Second)
	close(st.hold) // release the dead owner's goroutine
}

// A socket file left by a dead owner is replaced by the next owner.
func TestStaleSocketReplaced(t *testing.T) {
	dir, st := t.TempDir(), newState()
	path := filepath.Join(dir, SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	require.NoError(t, os.Chmod(path, 0o600))
	_, err = os.Lstat(path)
	require.NoError(t, err, "the stale socket is there")

	a := join(t, dir, "a", st)
	defer a.Close()
	assert.True(t, a.Owner())
	b := join(t, dir, "b", st)
	defer b.Close()
	res, err := b.Do(context.Background(), "echo", json.RawMessage(`1`))
	require.NoError(t, err)
	assert.Equal(t, "a", by(t, res))
}

// A socket that group or others may use, or that is not a socket, is not
// used: with the store held, joining fails and says why.
func TestUntrustedSocketRefused(t *testing.T) {
	dir, st := t.TempDir(), newState()
	a := join(t, dir, "a", st)
	defer a.Close()
	path := filepath.Join(dir, SocketName)
	require.NoError(t, os.Chmod(path, 0o666))

	opts := options(dir, "b", st)
	opts.JoinTimeout = 200 * time.Millisecond
	_, err := Join(context.Background(), dir, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its mode 0666 lets group or others connect; it must be 0600")
}

// The owner drops a connection from a process of another user without
// saying anything to it. Runs as root only: it runs a copy of the test
// binary as nobody (TestPeerHelper), which connects to the socket.
func TestOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	dir, err := os.MkdirTemp("", "owner-peer-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	helper := filepath.Join(dir, "helper.test")
	require.NoError(t, os.WriteFile(helper, self, 0o755))

	st := newState()
	var logs bytes.Buffer
	var logMu sync.Mutex
	opts := options(dir, "a", st)
	opts.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	c, err := Join(context.Background(), dir, opts)
	require.NoError(t, err)
	defer c.Close()
	path := filepath.Join(dir, SocketName)
	// Let the file modes through, so that only the peer check stands.
	require.NoError(t, os.Chmod(path, 0o777))

	cmd := exec.Command(helper, "-test.run=^TestPeerHelper$")
	cmd.Env = append(os.Environ(), "OWNER_PEER_HELPER="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "peer: closed without a word")
	logMu.Lock()
	assert.Contains(t, logs.String(), "runs as user id 65534, not 0")
	logMu.Unlock()

	// This user's processes are still served.
	require.NoError(t, os.Chmod(path, 0o600))
	b := join(t, dir, "b", st)
	defer b.Close()
	_, err = b.Do(context.Background(), "echo", json.RawMessage(`1`))
	require.NoError(t, err)
}

// TestPeerHelper is the process of another user in TestOtherUserRefused:
// it connects to the socket named by $OWNER_PEER_HELPER and reports what
// it reads.
func TestPeerHelper(t *testing.T) {
	path := os.Getenv("OWNER_PEER_HELPER")
	if path == "" {
		t.Skip("run by TestOtherUserRefused")
	}
	conn, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1000)
	n, err := conn.Read(buf)
	if n == 0 && errors.Is(err, io.EOF) {
		fmt.Println("peer: closed without a word")
		return
	}
	fmt.Printf("peer: read %q, %v\n", buf[:n], err)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A data directory whose socket path is too long for a socket address is
// served through a descriptor of the directory.
func TestLongSocketPath(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd")
	}
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.Greater(t, len(filepath.Join(dir, SocketName)), maxSunPath)
	st := newState()
	a := join(t, dir, "a", st)
	defer a.Close()
	b := join(t, dir, "b", st)
	defer b.Close()
	require.False(t, b.Owner())
	res, err := b.Do(context.Background(), "echo", json.RawMessage(`1`))
	require.NoError(t, err)
	assert.Equal(t, "a", by(t, res))
}

func TestClosedConn(t *testing.T) {
	dir, st := t.TempDir(), newState()
	a := join(t, dir, "a", st)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	_, err := a.Do(context.Background(), "echo", nil)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = os.Lstat(filepath.Join(dir, SocketName))
	assert.ErrorIs(t, err, os.ErrNotExist, "the owner removed its socket")
}
