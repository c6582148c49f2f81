package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// clientSide is a forwarding process's connection to the owner.
type clientSide struct {
	conn     *net.UnixConn
	dir      string
	ownerPID int
	timeout  time.Duration // Options.AnswerTimeout
	logger   *slog.Logger
	wmu      sync.Mutex    // one message written at a time
	dead     chan struct{} // closed when the connection has ended

	mu      sync.Mutex
	pending map[uint64]chan answer
	nextID  uint64
	bye     bool // the owner said goodbye before the connection ended
	// ping is the ping awaiting its pong (0: none), sent at pingSent.
	ping     uint64
	pingSent time.Time
	// silent is set when a ping stayed unanswered for timeout, and cleared
	// by its pong: new requests then fail without being sent.
	silent bool
}

// answer is the outcome of one request: the owner's answer, or, when the
// connection ended first, errResend or ErrOwnerGone.
type answer struct {
	res json.RawMessage
	err error
}

// dial connects to the owner's socket at path (in the data directory
// dir), after checking that the socket is this user's (see checkSocket),
// and reads its hello, waiting at most timeout for it: an owner that
// accepts the connection (the kernel does, for a stopped process) and
// sends no hello is a *NotAnsweringError.
func dial(dir, path string, timeout time.Duration, logger *slog.Logger) (*clientSide, error) {
	if err := checkSocket(path); err != nil {
		return nil, err
	}
	conn, err := dialUnix(path)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := readLine(r)
	conn.SetReadDeadline(time.Time{})
	var hello wireMsg
	if err == nil {
		err = json.Unmarshal(line, &hello)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		pid := peerPID(conn)
		conn.Close()
		return nil, &NotAnsweringError{Dir: dir, PID: pid, For: timeout}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("owner: no hello from the owner socket %s: %w", path, err)
	}
	if hello.Hello != protocol {
		conn.Close()
		return nil, fmt.Errorf("owner: the process owning %s (pid %d) speaks %q, not %q: it runs another crux version; stop it to use this one",
			path, hello.PID, hello.Hello, protocol)
	}
	cs := &clientSide{conn: conn, dir: dir, ownerPID: hello.PID, timeout: timeout, logger: logger,
		dead: make(chan struct{}), pending: map[uint64]chan answer{}}
	go cs.read(r)
	go cs.watch()
	return cs, nil
}

// watch pings the owner while requests wait for it, or while it is
// silent, every fifth of the answer timeout; a ping left unanswered for
// the timeout makes the owner silent and fails every request waiting
// (see NotAnsweringError). It ends with the connection.
func (cs *clientSide) watch() {
	t := time.NewTicker(cs.timeout / 5)
	defer t.Stop()
	for {
		select {
		case <-cs.dead:
			return
		case now := <-t.C:
			cs.mu.Lock()
			switch {
			case len(cs.pending) == 0 && !cs.silent:
			case cs.ping == 0:
				cs.nextID++
				cs.ping, cs.pingSent = cs.nextID, now
				go cs.send(fmt.Appendf(nil, "{\"ping\":%d}\n", cs.ping))
			case now.Sub(cs.pingSent) >= cs.timeout:
				cs.failSilent(now.Sub(cs.pingSent))
			}
			cs.mu.Unlock()
		}
	}
}

// failSilent marks the owner silent for d and fails every request waiting
// with a *NotAnsweringError. cs.mu is held.
func (cs *clientSide) failSilent(d time.Duration) {
	cs.silent = true
	fail := answer{err: &NotAnsweringError{Dir: cs.dir, PID: cs.ownerPID, For: d, Sent: true}}
	for id, ch := range cs.pending {
		ch <- fail
		delete(cs.pending, id)
	}
}

// send writes one message, a line with its newline, and reports whether
// it was written whole. A line the owner does not take within the answer
// timeout means it stopped reading without going: the requests waiting
// fail as for an unanswered ping, and the connection is closed, since the
// rest of the half-written line would never follow. Another write error
// means the owner has gone or is going; the reader then ends the
// connection, after the goodbye if there is one.
func (cs *clientSide) send(line []byte) bool {
	cs.wmu.Lock()
	defer cs.wmu.Unlock()
	cs.conn.SetWriteDeadline(time.Now().Add(cs.timeout))
	_, err := cs.conn.Write(line)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cs.mu.Lock()
		cs.failSilent(cs.timeout)
		cs.mu.Unlock()
		cs.conn.Close()
	}
	return err == nil
}

// read delivers the owner's answers until the connection ends, then fails
// every request still waiting: with errResend after a goodbye (the owner
// never read them), else with ErrOwnerGone.
func (cs *clientSide) read(r *bufio.Reader) {
	defer func() {
		cs.conn.Close()
		cs.mu.Lock()
		fail := answer{err: ErrOwnerGone}
		if cs.bye {
			fail.err = errResend
		}
		for id, ch := range cs.pending {
			ch <- fail
			delete(cs.pending, id)
		}
		close(cs.dead)
		cs.mu.Unlock()
	}()
	for {
		line, err := readLine(r)
		if err != nil {
			return
		}
		if id, res, ok := parseResult(line); ok {
			cs.deliver(id, answer{res: res}) // readLine returns a line of its own
			continue
		}
		var m wireMsg
		if err := json.Unmarshal(line, &m); err != nil {
			cs.logger.Error("crux: a malformed message from the owner; dropping the connection", "err", err)
			return
		}
		cs.mu.Lock()
		switch {
		case m.Bye:
			cs.bye = true
			cs.mu.Unlock()
			continue
		case m.Pong != 0:
			if m.Pong == cs.ping {
				cs.ping, cs.silent = 0, false
			}
			cs.mu.Unlock()
			continue
		}
		cs.mu.Unlock()
		if m.Err != nil {
			cs.deliver(m.ID, answer{err: m.Err})
		} else {
			cs.deliver(m.ID, answer{res: m.Res})
		}
	}
}

// deliver hands a to the request id, if it still waits.
func (cs *clientSide) deliver(id uint64, a answer) {
	cs.mu.Lock()
	ch, ok := cs.pending[id]
	delete(cs.pending, id)
	cs.mu.Unlock()
	if ok {
		ch <- a
	}
}

// ended reports whether the connection has ended.
func (cs *clientSide) ended() bool {
	select {
	case <-cs.dead:
		return true
	default:
		return false
	}
}

// do sends one request and waits for its answer.
func (cs *clientSide) do(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error) {
	ch := make(chan answer, 1)
	cs.mu.Lock()
	if cs.ended() {
		cs.mu.Unlock()
		return nil, errResend // never sent: safe to send elsewhere
	}
	if cs.silent {
		err := &NotAnsweringError{Dir: cs.dir, PID: cs.ownerPID, For: time.Since(cs.pingSent)}
		cs.mu.Unlock()
		return nil, err
	}
	cs.nextID++
	id := cs.nextID
	cs.pending[id] = ch
	cs.mu.Unlock()

	b, err := json.Marshal(&wireMsg{ID: id, Op: op, Req: req})
	if err != nil {
		cs.cancel(id)
		return nil, err
	}
	if !cs.send(append(b, '\n')) {
		// The owner has gone (or is going), or stopped reading: a request
		// that could not be written whole was not read whole, so it did
		// not run, and send closed the connection. The reader
		// ends the connection when it meets the goodbye or the end; the
		// answers before them are still delivered.
		cs.cancel(id)
		<-cs.dead
		return nil, errResend
	}
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		cs.cancel(id)
		return nil, ctx.Err()
	}
}

// cancel stops waiting for the answer to request id.
func (cs *clientSide) cancel(id uint64) {
	cs.mu.Lock()
	delete(cs.pending, id)
	cs.mu.Unlock()
}

// close closes the connection; the owner then forgets it.
func (cs *clientSide) close() error {
	err := cs.conn.Close()
	<-cs.dead
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
