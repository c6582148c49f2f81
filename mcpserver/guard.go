package mcpserver

import (
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The guard's timer (see "Standard input and the Go runtime" in the package
// documentation): armed for guardPeriod when a read of the input begins,
// and re-armed every guardPeriod while input has arrived that no output has
// followed yet, for at most guardLinger after the latest read began. Output
// stops it, unless a read began less than guardSettle ago: that read may
// not have entered its system call yet.
const (
	guardPeriod = 10 * time.Millisecond
	guardLinger = 100 * time.Millisecond
	guardSettle = 100 * time.Microsecond
)

// StdioTransport returns the transport of [ServeStdio] and of the crux
// command: newline-delimited JSON-RPC, read from r and written to w, as
// the SDK's [mcp.IOTransport] reads and writes it (with the SDK's own
// message encoding, each message decoded once), with two layers in front
// of it.
//
// The framing layer checks every line before the SDK reads it: a line that
// is not one well-formed JSON-RPC message is answered with -32700 or
// -32600 and skipped, and the session goes on (see "Malformed input" in
// the package documentation). It also holds back the end of the input
// until every call read has been answered, and with [Serve] it stops
// reading when the context ends and finishes the calls it has read (see
// "Shutting down"). Under [Serve], it also answers most tools/call
// requests itself (see "Tool calls over stdio").
//
// The guard keeps a runtime timer pending while a read of r begins and
// while a request is being answered. The timer bounds a stall of the Go
// runtime that can otherwise hold a reply for up to a minute; see
// "Standard input and the Go runtime" in the package documentation. It
// does not run while the server waits for input with every reply written.
//
// The transport connects once. Closing the connection closes r (wrap it in
// io.NopCloser to keep it open) but not w. Replies and the framing layer's
// answers are written to w whole, one line per Write, never interleaved.
func StdioTransport(r io.ReadCloser, w io.Writer) mcp.Transport {
	g := newGuard(r, w)
	return &stdioTransport{f: newFramer(g, guardWriter{g})}
}

// guard is the input of a StdioTransport, and through guardWriter its
// output, with the timer that keeps sysmon from sleeping long.
type guard struct {
	r      io.ReadCloser
	w      io.Writer
	period time.Duration // how long the timer is armed for
	linger time.Duration // re-arm no later than this after a read began
	settle time.Duration // output stops the timer this long after a read began

	mu     sync.Mutex
	timer  *time.Timer // created by the first Read
	armed  bool        // the timer is pending
	busy   bool        // input has arrived that no output has followed yet
	last   time.Time   // when the latest Read began
	closed bool
}

func newGuard(r io.ReadCloser, w io.Writer) *guard {
	return &guard{r: r, w: w, period: guardPeriod, linger: guardLinger, settle: guardSettle}
}

// Read arms the timer, then reads from r once.
func (g *guard) Read(p []byte) (int, error) {
	g.arm()
	n, err := g.r.Read(p)
	if n > 0 {
		g.mu.Lock()
		g.busy = true
		g.mu.Unlock()
	}
	return n, err
}

// Close stops the timer and closes r.
func (g *guard) Close() error {
	g.mu.Lock()
	g.closed = true
	g.armed = false
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	return g.r.Close()
}

// arm makes the timer pending for a period from now. time.AfterFunc and
// Reset put the timer in the runtime's timer heap before they return (a
// channel timer would be added only once a goroutine blocks on its
// channel), so the timer is pending before the read that follows enters its
// system call.
func (g *guard) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.last = time.Now()
	g.armed = true
	if g.timer == nil {
		g.timer = time.AfterFunc(g.period, g.tick)
		return
	}
	g.timer.Reset(g.period)
}

// disarm ends the busy state and stops the timer, unless the latest read
// began less than settle ago: that read may still be on its way to its
// system call, so the timer is left to fire once and lapse. A read that
// began earlier has entered its system call unless its goroutine waited
// that long for a thread, so with a reply that took longer than settle to
// compute, the timer stops with the reply, and a server that has answered
// everything runs no timer.
func (g *guard) disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
	if g.timer == nil || time.Since(g.last) < g.settle {
		return
	}
	g.armed = false
	g.timer.Stop()
}

// tick runs when the timer fires. It re-arms the timer while a request may
// be in flight (input has arrived that no output has followed) and a read
// began less than linger ago; otherwise it lets the timer lapse.
func (g *guard) tick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || !g.busy || time.Since(g.last) >= g.linger {
		g.armed = false
		return
	}
	g.timer.Reset(g.period)
}

// guardWriter is the output of a StdioTransport. A write is a reply going
// out: it ends the guard's busy state and stops the timer (see disarm).
// Close does nothing.
type guardWriter struct{ g *guard }

// Write writes p to the guard's w, then disarms the guard.
func (w guardWriter) Write(p []byte) (int, error) {
	n, err := w.g.w.Write(p)
	w.g.disarm()
	return n, err
}

// Close does nothing: the transport does not own w.
func (guardWriter) Close() error { return nil }
