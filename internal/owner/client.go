package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// clientSide is a forwarding process's connection to the owner.
type clientSide struct {
	conn     *net.UnixConn
	ownerPID int
	logger   *slog.Logger
	wmu      sync.Mutex    // one message written at a time
	dead     chan struct{} // closed when the connection has ended

	mu      sync.Mutex
	pending map[uint64]chan answer
	nextID  uint64
	bye     bool // the owner said goodbye before the connection ended
}

// answer is the outcome of one request: the owner's answer, or, when the
// connection ended first, errResend or ErrOwnerGone.
type answer struct {
	res json.RawMessage
	err error
}

// helloTimeout bounds the wait for the owner's hello.
const helloTimeout = 5 * time.Second

// dial connects to the owner's socket at path, after checking that the
// socket is this user's (see checkSocket), and reads its hello.
func dial(path string, logger *slog.Logger) (*clientSide, error) {
	if err := checkSocket(path); err != nil {
		return nil, err
	}
	conn, err := dialUnix(path)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(helloTimeout))
	line, err := readLine(r)
	conn.SetReadDeadline(time.Time{})
	var hello wireMsg
	if err == nil {
		err = json.Unmarshal(line, &hello)
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
	cs := &clientSide{conn: conn, ownerPID: hello.PID, logger: logger, dead: make(chan struct{}), pending: map[uint64]chan answer{}}
	go cs.read(r)
	return cs, nil
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
		if m.Bye {
			cs.bye = true
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
	cs.nextID++
	id := cs.nextID
	cs.pending[id] = ch
	cs.mu.Unlock()

	b, err := json.Marshal(&wireMsg{ID: id, Op: op, Req: req})
	if err != nil {
		cs.cancel(id)
		return nil, err
	}
	b = append(b, '\n')
	cs.wmu.Lock()
	_, err = cs.conn.Write(b)
	cs.wmu.Unlock()
	if err != nil {
		// The owner has gone (or is going): a request that could not be
		// written whole was not read whole, so it did not run. The reader
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
