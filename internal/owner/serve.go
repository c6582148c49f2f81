package owner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// ownerSide is the owner's end: the host, the listener and the connections
// of the forwarding processes.
type ownerSide struct {
	host   Host
	ln     *net.UnixListener
	logger *slog.Logger
	done   chan struct{} // closed when the accept loop has ended

	mu      sync.Mutex
	closing bool
	conns   map[*serverConn]struct{}
	calls   sync.WaitGroup // operations running, local and forwarded
}

// listen starts serving host on the socket at path. The caller holds the
// store, so any file at path is a dead owner's socket: it is removed.
func listen(path string, host Host, logger *slog.Logger) (*ownerSide, error) {
	o := &ownerSide{host: host, logger: logger, done: make(chan struct{}), conns: map[*serverConn]struct{}{}}
	ln, err := listenUnix(path)
	if errors.Is(err, errNoSockets) {
		close(o.done) // no listener: this process alone uses the store
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	o.ln = ln
	go o.accept()
	return o, nil
}

// accept serves every connection until the listener is closed.
func (o *ownerSide) accept() {
	defer close(o.done)
	for {
		conn, err := o.ln.AcceptUnix()
		if err != nil {
			o.mu.Lock()
			closing := o.closing
			o.mu.Unlock()
			if closing {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			o.logger.Error("crux: accepting a connection on the owner socket", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err := checkPeer(conn); err != nil {
			o.logger.Warn("crux: refused a connection to the owner socket", "err", err)
			conn.Close()
			continue
		}
		sc := &serverConn{o: o, conn: conn, readDone: make(chan struct{})}
		o.mu.Lock()
		if o.closing {
			o.mu.Unlock()
			conn.Close()
			return
		}
		o.conns[sc] = struct{}{}
		o.mu.Unlock()
		go sc.serve()
	}
}

// do runs one operation of the owner's own process.
func (o *ownerSide) do(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error) {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		return nil, errResend
	}
	o.calls.Add(1)
	o.mu.Unlock()
	defer o.calls.Done()
	res, err := o.host.Handle(ctx, op, req)
	if err != nil {
		return nil, asWireError(err)
	}
	return res, nil
}

// local runs fn with the host, unless the owner is closing.
func (o *ownerSide) local(fn func(Host) error) (bool, error) {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		return false, nil
	}
	o.calls.Add(1)
	o.mu.Unlock()
	defer o.calls.Done()
	return true, fn(o.host)
}

// close hands over: no more connections, no more requests read, every
// request read answered, a goodbye on every connection, the store closed.
func (o *ownerSide) close() error {
	o.mu.Lock()
	o.closing = true
	conns := make([]*serverConn, 0, len(o.conns))
	for sc := range o.conns {
		conns = append(conns, sc)
	}
	o.mu.Unlock()
	// Closing the listener removes the socket file, so that no process
	// connects to an owner that is leaving.
	var err error
	if o.ln != nil {
		err = o.ln.Close()
	}
	<-o.done
	for _, sc := range conns {
		sc.stopReading()
	}
	o.calls.Wait()
	for _, sc := range conns {
		sc.bye()
	}
	if cerr := o.host.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	o.logger.Debug("crux: released the store; the next process takes it over")
	return err
}

// serverConn is the owner's end of one connection.
type serverConn struct {
	o        *ownerSide
	conn     *net.UnixConn
	readDone chan struct{} // closed when serve stops reading
	wmu      sync.Mutex    // one message written at a time
	werr     error         // the first write error; later writes are skipped
}

// serve says hello, then reads requests and runs each in its own
// goroutine until the connection ends or stopReading stops it.
func (sc *serverConn) serve() {
	defer close(sc.readDone)
	sc.write(&wireMsg{Hello: protocol, PID: os.Getpid()})
	r := bufio.NewReaderSize(sc.conn, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				// The peer closed its end (or broke the protocol): nothing
				// more will be read from it, and answers to it are lost.
				sc.o.forget(sc)
			}
			return
		}
		var m wireMsg
		err = json.Unmarshal(line, &m)
		if err == nil && m.Ping != 0 && m.ID == 0 {
			sc.write(&wireMsg{Pong: m.Ping})
			continue
		}
		if err != nil || m.ID == 0 || m.Op == "" {
			sc.o.logger.Warn("crux: a malformed message on the owner socket; closing that connection", "err", err)
			sc.o.forget(sc)
			return
		}
		sc.o.calls.Add(1)
		go sc.run(m)
	}
}

// run runs one forwarded request and writes its answer.
func (sc *serverConn) run(m wireMsg) {
	defer sc.o.calls.Done()
	res, err := sc.o.host.Handle(context.Background(), m.Op, m.Req)
	if err == nil && resultLine(res) {
		sc.writeLine(appendResult(nil, m.ID, res))
		return
	}
	out := &wireMsg{ID: m.ID}
	if err != nil {
		out.Err = asWireError(err)
	} else {
		out.Res = res
		if out.Res == nil {
			out.Res = json.RawMessage("null")
		}
	}
	sc.write(out)
}

// resultPrefix starts the line of an answer with a result, which
// appendResult writes and parseResult reads without decoding the result.
const resultPrefix = `{"id":`

// resultLine reports whether res may be sent as it is by appendResult: a
// JSON value on one line (json.Marshal's output is; a value with a raw
// newline is sent re-encoded by write instead).
func resultLine(res json.RawMessage) bool {
	return len(res) > 0 && bytes.IndexByte(res, '\n') < 0
}

// appendResult appends the line {"id":N,"res":RES} to b.
func appendResult(b []byte, id uint64, res json.RawMessage) []byte {
	b = append(b, resultPrefix...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"res":`...)
	b = append(b, res...)
	return append(b, '}', '\n')
}

// parseResult reads a line appendResult wrote: its id and result. ok is
// false for any other line.
func parseResult(line []byte) (id uint64, res json.RawMessage, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(resultPrefix))
	if !found {
		return 0, nil, false
	}
	digits, rest, found := bytes.Cut(rest, []byte(`,"res":`))
	if !found || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return 0, nil, false
	}
	id, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil || id == 0 {
		return 0, nil, false
	}
	return id, rest[:len(rest)-1], true
}

// write sends one message. A failed write means the peer is gone; the
// answers it would have got are dropped.
func (sc *serverConn) write(m *wireMsg) {
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(&wireMsg{ID: m.ID, Err: &Error{Code: -32603, Message: "owner: answer not encodable: " + err.Error()}})
	}
	sc.writeLine(append(b, '\n'))
}

// writeLine sends one line, newline included.
func (sc *serverConn) writeLine(b []byte) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.werr != nil {
		return
	}
	if _, err := sc.conn.Write(b); err != nil {
		sc.werr = err
	}
}

// stopReading makes serve stop reading and waits until it has: every
// request it has read by then is running (and counted in calls).
func (sc *serverConn) stopReading() {
	sc.conn.SetReadDeadline(time.Now())
	<-sc.readDone
}

// bye tells the peer that nothing more it sent will be read, and closes
// the connection.
func (sc *serverConn) bye() {
	sc.write(&wireMsg{Bye: true})
	sc.conn.Close()
}

// forget closes a connection whose peer has gone. Its running requests
// finish; their answers cannot be written and are dropped.
func (o *ownerSide) forget(sc *serverConn) {
	o.mu.Lock()
	if o.closing {
		// close holds sc in its list and closes it after the goodbye.
		o.mu.Unlock()
		return
	}
	delete(o.conns, sc)
	o.mu.Unlock()
	sc.conn.Close()
}

// readLine reads one message: a line of at most maxLine bytes, without its
// newline.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return nil, errors.New("owner: message longer than the limit")
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}
