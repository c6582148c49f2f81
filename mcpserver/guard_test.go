package mcpserver

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isArmed reports whether g's timer is pending.
func (g *guard) isArmed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.armed
}

// funcReader is an io.ReadCloser made of functions.
type funcReader struct {
	read  func([]byte) (int, error)
	close func() error
}

func (r funcReader) Read(p []byte) (int, error) { return r.read(p) }
func (r funcReader) Close() error               { return r.close() }

// never is a timer period no test waits for: the tests call tick
// themselves.
const never = time.Hour

// manualGuard returns a guard whose timer never fires by itself and never
// lapses for age, and whose output always stops it.
func manualGuard(r io.ReadCloser, w io.Writer) *guard {
	g := newGuard(r, w)
	g.period, g.linger, g.settle = never, never, 0
	return g
}

// TestGuardArmsBeforeEachRead: the timer is pending when the wrapped reader
// is called, so it is pending when that read enters its system call.
func TestGuardArmsBeforeEachRead(t *testing.T) {
	var g *guard
	calls := 0
	inner := funcReader{
		read: func(p []byte) (int, error) {
			calls++
			assert.True(t, g.isArmed(), "read %d began with no timer pending", calls)
			if calls > 3 {
				return 0, io.EOF
			}
			return copy(p, "line\n"), nil
		},
		close: func() error { return nil },
	}
	g = manualGuard(inner, io.Discard)
	data, err := io.ReadAll(g)
	require.NoError(t, err)
	assert.Equal(t, "line\nline\nline\n", string(data))
	assert.Equal(t, 4, calls, "one read of the wrapped reader per Read")
	require.NoError(t, g.Close())
}

// TestGuardTicksOnlyWhileAnswering: when the timer fires, it is re-armed
// while input has arrived that no output has followed; the reply stops it.
// It lapses when no input came (an idle server) and, whatever the state,
// once linger has passed since the latest read began.
func TestGuardTicksOnlyWhileAnswering(t *testing.T) {
	pr, pw := io.Pipe()
	var out bytes.Buffer
	g := manualGuard(pr, &out)
	w := guardWriter{g}
	reads := make(chan string)
	readOne := func() {
		buf := make([]byte, 64)
		n, _ := g.Read(buf)
		reads <- string(buf[:n])
	}

	// Idle: a read waits for input that does not come.
	go readOne()
	require.Eventually(t, g.isArmed, 5*time.Second, time.Millisecond, "the read arms the timer")
	g.tick()
	assert.False(t, g.isArmed(), "no input: the timer lapses")

	// A request arrives; the next read begins while it is answered.
	_, err := pw.Write([]byte(`{"request":1}` + "\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"request":1}`+"\n", <-reads)
	go readOne()
	require.Eventually(t, g.isArmed, 5*time.Second, time.Millisecond)
	g.tick()
	assert.True(t, g.isArmed(), "a request in flight: the timer is re-armed")
	g.tick()
	assert.True(t, g.isArmed())

	// The reply goes out.
	_, err = w.Write([]byte(`{"reply":1}` + "\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"reply":1}`+"\n", out.String())
	assert.False(t, g.isArmed(), "replied: the timer is stopped")
	g.tick()
	assert.False(t, g.isArmed())

	// A request that stays unanswered re-arms the timer only until linger
	// has passed since the latest read began.
	_, err = pw.Write([]byte(`{"request":2}` + "\n"))
	require.NoError(t, err)
	<-reads
	go readOne()
	require.Eventually(t, g.isArmed, 5*time.Second, time.Millisecond)
	g.mu.Lock()
	g.last = g.last.Add(-never)
	g.mu.Unlock()
	g.tick()
	assert.False(t, g.isArmed(), "linger passed: the timer lapses")

	require.NoError(t, pw.Close())
	assert.Empty(t, <-reads)
}

// TestGuardReplyRightAfterRead: a reply written less than settle after a
// read began leaves the timer pending, since that read may not have entered
// its system call; the timer then lapses when it fires.
func TestGuardReplyRightAfterRead(t *testing.T) {
	g := manualGuard(funcReader{
		read:  func(p []byte) (int, error) { return copy(p, "request\n"), nil },
		close: func() error { return nil },
	}, io.Discard)
	g.settle = never
	_, err := g.Read(make([]byte, 64))
	require.NoError(t, err)
	_, err = g.Read(make([]byte, 64)) // the read that follows the request
	require.NoError(t, err)
	_, err = guardWriter{g}.Write([]byte("reply\n"))
	require.NoError(t, err)
	assert.True(t, g.isArmed(), "the read began just now: the timer stays pending")
	g.tick()
	assert.False(t, g.isArmed(), "answered: the timer lapses when it fires")
}

// TestGuardTimerLapses: with real periods, the timer armed by a read that
// waits for input lapses on its own, and so does the timer that is re-armed
// while a request is unanswered, once linger has passed.
func TestGuardTimerLapses(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	entered := make(chan struct{}, 1)
	inner := funcReader{
		read: func(p []byte) (int, error) {
			entered <- struct{}{}
			return pr.Read(p)
		},
		close: pr.Close,
	}
	g := newGuard(inner, io.Discard)
	g.period, g.linger = time.Millisecond, 20*time.Millisecond
	reads := make(chan struct{}, 2)
	readOne := func() {
		g.Read(make([]byte, 64))
		reads <- struct{}{}
	}

	go readOne()
	<-entered // the timer was armed before this
	require.Eventually(t, func() bool { return !g.isArmed() }, 5*time.Second, time.Millisecond, "idle: the timer lapses")

	_, err := pw.Write([]byte("x"))
	require.NoError(t, err)
	<-reads
	go readOne() // a request in flight, never answered
	<-entered
	require.Eventually(t, func() bool { return !g.isArmed() }, 5*time.Second, time.Millisecond, "the timer stops after linger")
}

// TestGuardClose: Close closes the wrapped reader and stops the timer; a
// Read after it does not arm the timer again. The writer's Close leaves
// the output open.
func TestGuardClose(t *testing.T) {
	closed := 0
	errClosed := errors.New("closed")
	inner := funcReader{
		read: func(p []byte) (int, error) {
			if closed > 0 {
				return 0, errClosed
			}
			return copy(p, "x"), nil
		},
		close: func() error { closed++; return nil },
	}
	var out strings.Builder
	g := manualGuard(inner, &out)
	_, err := g.Read(make([]byte, 1))
	require.NoError(t, err)
	require.True(t, g.isArmed())

	require.NoError(t, guardWriter{g}.Close())
	require.NoError(t, g.Close())
	assert.Equal(t, 1, closed)
	assert.False(t, g.isArmed())
	_, err = g.Read(make([]byte, 1))
	assert.ErrorIs(t, err, errClosed)
	assert.False(t, g.isArmed())
	g.tick()
	assert.False(t, g.isArmed())

	_, err = guardWriter{g}.Write([]byte("still open"))
	require.NoError(t, err)
	assert.Equal(t, "still open", out.String())
}
