package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the framing layer's input (see "Malformed input" in the
// package documentation).
const (
	// maxLineLength bounds a line of input, without its newline. It is the
	// SDK's own default, mcp.DefaultMaxLineLength: 16 MiB.
	maxLineLength = mcp.DefaultMaxLineLength
	// readBufferSize is the size of the buffer input is read through.
	readBufferSize = 64 << 10
)

// The SDK's newline-delimited transport (mcp.IOTransport, ioConn in
// mcp/transport.go of go-sdk v1.8.0) reads its input with one json.Decoder
// and ends the session at the first message it cannot take: a JSON syntax
// error (`{bad json`, a NaN literal), bytes other than a newline after the
// value (a NUL), a frame longer than MaxLineLength, and every error of
// jsonrpc2.DecodeMessage (no "jsonrpc":"2.0", an id that is an object, an
// array or a boolean, nesting deeper than 1000, a "method" that is not a
// string) come back from ioConn.Read as an error; jsonrpc2's readIncoming
// takes any read error as the end of the stream, so no -32700 or -32600 is
// sent and the server stops. A batch is an error as well once the
// negotiated version is 2025-06-18 or later, and before that one malformed
// element ends the session too. An id that is a number with a fraction or
// beyond 2^53 is truncated or rounded (MakeID reads it as a float64 and
// converts it to int64), so the reply carries another id; an id of null
// turns a call into a notification, which runs without a reply; and a call
// that reuses the id of a call in flight gets no reply at all.
//
// The framer sits between the input and the SDK and passes on only lines
// the SDK reads as the client meant them; it answers every other line
// itself. It also decides when the SDK sees the end of the input: the SDK
// drops every reply not yet written once its reader has failed (writes
// check shuttingDown, which is true once readErr is set, and the calls in
// flight are cancelled), so the framer holds the end of the input back
// until every call it passed on has been answered.
//
// Under Serve, the framer also answers the common tools/call itself, on
// its direct path (see direct.go): such a call is pending as one handed
// to the SDK is, and never reaches the SDK.

// A framer is the input and output of a StdioTransport between the guard
// and the SDK: a goroutine (pump) reads lines from in and checks each one,
// answers a bad line itself on out, runs a tools/call of the direct path
// itself, and hands the other good ones on, decoded, to the SDK, which
// reads them through framerConn (next) and writes its replies through it.
// Read and framerWriter offer the same lines as a byte stream, as the
// SDK's own IOTransport would read them. Every write to out is one whole
// line, under wmu.
type framer struct {
	in      io.ReadCloser
	out     io.Writer
	maxLine int

	wmu sync.Mutex // serialises writes to out, one line each

	lines     chan inbound    // good lines, for Read and next
	ended     chan struct{}   // closed when no line will come any more
	idle      chan *pumpState // goroutines done with a direct call, waiting to read again
	endOnce   sync.Once
	closedCh  chan struct{} // closed by Close
	closeOnce sync.Once
	startOnce sync.Once

	mu        sync.Mutex
	cond      *sync.Cond   // signalled when pending shrinks, on Close and on a failed write
	logger    *slog.Logger // never nil
	pending   map[any]bool // ids (int64 or string) of calls passed on and not yet answered
	stopped   bool         // stop was called: read no more input
	reading   bool         // the pump is in a read of in
	byStop    bool         // the input ended because of stop
	inErr     error        // the error that ended the input; nil for EOF or stop
	broken    bool         // a write to out failed
	closed    bool
	answered  int // lines answered by the framer
	passed    int // lines handed to the SDK
	dropped   int // responses of the client that could not be passed on
	connected bool
	directed  int                        // calls answered on the direct path
	calls     map[any]context.CancelFunc // direct calls in flight, by id

	direct atomic.Pointer[directPath] // set by serve once the SDK's session exists
	wg     sync.WaitGroup             // direct calls running

	cur []byte // the rest of the line Read is handing out (SDK goroutine only)
}

// inbound is a line the framer passes on: its text, newline-terminated,
// and the message the SDK's decoder (jsonrpc.DecodeMessage) made of it
// when check read it.
type inbound struct {
	line []byte
	msg  jsonrpc.Message
}

func newFramer(in io.ReadCloser, out io.Writer) *framer {
	f := &framer{
		in:       in,
		out:      out,
		maxLine:  maxLineLength,
		lines:    make(chan inbound),
		ended:    make(chan struct{}),
		idle:     make(chan *pumpState),
		closedCh: make(chan struct{}),
		logger:   slog.New(slog.DiscardHandler),
		pending:  make(map[any]bool),
		calls:    make(map[any]context.CancelFunc),
	}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// setLogger sets where the framer reports the lines it answers or drops.
func (f *framer) setLogger(l *slog.Logger) {
	if l == nil {
		return
	}
	f.mu.Lock()
	f.logger = l
	f.mu.Unlock()
}

// start starts the pump, once.
func (f *framer) start() { f.startOnce.Do(func() { go f.pump() }) }

// stop makes the framer read no more input. Lines already read are still
// checked and handed on; a read in progress is abandoned, and what it
// returns is discarded. Once every call handed on has been answered, Read
// reports the end of the input.
func (f *framer) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	if f.reading {
		// The pump is waiting for input that may never come; it holds no
		// complete line (it reads only when it has none).
		f.byStop = true
		f.endLocked()
	}
}

// endLocked closes ended, once. f.mu is held.
func (f *framer) endLocked() { f.endOnce.Do(func() { close(f.ended) }) }

// stoppedByStop reports whether the input ended because of stop.
func (f *framer) stoppedByStop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byStop
}

// errStopped ends the pump's reading after stop.
var errStopped = errors.New("mcpserver: input stopped")

// pumpSource is the pump's view of in: a read checks for stop before and
// after it.
type pumpSource struct{ f *framer }

func (s pumpSource) Read(p []byte) (int, error) {
	f := s.f
	f.mu.Lock()
	if f.stopped || f.closed {
		f.mu.Unlock()
		return 0, errStopped
	}
	f.reading = true
	f.mu.Unlock()
	n, err := f.in.Read(p)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reading = false
	if f.stopped && f.byStop {
		// stop gave up on this read: what it returned is not taken.
		return 0, errStopped
	}
	return n, err
}

// pump reads lines from in until its end, an error or stop, and checks
// each one (see handle). A line longer than maxLine is answered once and
// skipped: at most maxLine bytes of it are held.
func (f *framer) pump() {
	f.pumpFrom(&pumpState{br: bufio.NewReaderSize(pumpSource{f}, readBufferSize)})
}

// pumpState is where the pump is in the input.
type pumpState struct {
	br       *bufio.Reader
	long     []byte // a line longer than the buffer, gathered
	skipping bool   // in a line already answered for its length
}

// pumpFrom is the pump, from st on. When a line is a call that the direct
// path runs (see direct.go), another goroutine goes on reading from st, and
// this one runs the call: the call starts at once, on a thread that is
// running, rather than waiting for one to pick it up. Then this goroutine
// waits to read again, until the input ends. The reading goes to such a
// waiting goroutine when there is one, else to a new one: a goroutine that
// has run a call keeps the stack the call grew (a new goroutine's stack
// would grow again, copied at each doubling, for every call).
func (f *framer) pumpFrom(st *pumpState) {
	for {
		call, ended := f.readUntilCall(st)
		if call == nil {
			return
		}
		if !ended {
			select {
			case f.idle <- st:
			default:
				go f.pumpFrom(st)
			}
		}
		call()
		if ended {
			return
		}
		select {
		case st = <-f.idle:
		case <-f.ended:
			return
		}
	}
}

// readUntilCall reads and handles lines from st until a line is a call the
// direct path runs, which it returns, or the input ends (then it reports
// ended, with the call of the last line if it is one).
func (f *framer) readUntilCall(st *pumpState) (call func(), ended bool) {
	for {
		frag, err := st.br.ReadSlice('\n')
		full := err == nil // frag ends with the newline
		if err == bufio.ErrBufferFull {
			err = nil
		}
		switch {
		case st.skipping:
			if full {
				st.skipping = false
			}
		case !full && err == nil: // a part of a line that goes on
			if len(st.long)+len(frag) > f.maxLine {
				f.tooLong(append(st.long, frag[:f.maxLine-len(st.long)]...))
				st.long, st.skipping = nil, true
				break
			}
			st.long = append(st.long, frag...)
		case errors.Is(err, errStopped):
			// Stopped: a line not yet complete is not taken.
		default: // a whole line, or the last one, cut off by the end of the input
			line := frag
			if st.long != nil {
				line = append(st.long, frag...)
			}
			if full {
				line = line[:len(line)-1]
			}
			if len(line) > f.maxLine {
				f.tooLong(line[:f.maxLine])
			} else {
				call = f.handle(line)
			}
			st.long = nil
		}
		if err != nil {
			f.endInput(err)
			return call, true
		}
		if call != nil {
			return call, false
		}
	}
}

// endInput records why the input ended and lets Read see the end.
func (f *framer) endInput(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case errors.Is(err, errStopped):
		if f.stopped {
			f.byStop = true
		}
	case err != io.EOF:
		f.inErr = err
	}
	f.endLocked()
}

// Read hands out the good lines as a byte stream, one at a time. At the
// end of the input it waits until every call handed on has been answered
// (or the output has failed, or the framer is closed), then returns
// io.EOF, or the error that ended the input.
func (f *framer) Read(p []byte) (int, error) {
	if len(f.cur) == 0 {
		select {
		case in := <-f.lines:
			f.cur = in.line
		case <-f.ended:
			return 0, f.drain()
		case <-f.closedCh:
			return 0, io.EOF
		}
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}

// next returns the next message passed on, decoded: what the connection
// of a StdioTransport reads. At the end of the input it waits as Read
// does, and returns its error.
func (f *framer) next(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case in := <-f.lines:
		return in.msg, nil
	case <-f.ended:
		return nil, f.drain()
	case <-f.closedCh:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain waits until no call handed on is unanswered, the output has
// failed, or the framer is closed, and returns the error that ended the
// input, io.EOF if none.
func (f *framer) drain() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.pending) > 0 && !f.broken && !f.closed {
		f.cond.Wait()
	}
	if f.inErr != nil {
		return f.inErr
	}
	return io.EOF
}

// Close closes in, once, and ends a Read waiting for input or replies.
func (f *framer) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		f.cond.Broadcast()
		f.mu.Unlock()
		close(f.closedCh)
		err = f.in.Close()
	})
	return err
}

// handle checks one line without its newline and answers it, hands it on,
// or (a response that cannot be passed on) drops it. A blank line is
// skipped. A call the direct path takes is returned, to be run by the
// caller; line is not used by it.
func (f *framer) handle(line []byte) func() {
	line = trimSpace(line)
	if len(line) == 0 {
		return nil
	}
	v := check(line)
	switch v.outcome {
	case outcomePass:
		req, _ := v.msg.(*jsonrpc.Request)
		if req != nil {
			f.cancelDirect(req)
		}
		if v.call {
			f.mu.Lock()
			if f.pending[v.id] {
				f.mu.Unlock()
				f.answer(line, errorReply(nil, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("Invalid Request: request id %s is already in use by a call in flight", idText(v.id))))
				return nil
			}
			f.pending[v.id] = true
			f.mu.Unlock()
			if call := f.callDirect(v.id, req); call != nil {
				return call
			}
		}
		text := make([]byte, len(line)+1)
		copy(text, line)
		text[len(line)] = '\n'
		select {
		case f.lines <- inbound{line: text, msg: v.msg}:
			f.mu.Lock()
			f.passed++
			f.mu.Unlock()
		case <-f.closedCh:
		}
	case outcomeAnswer:
		f.answer(line, v.reply)
	case outcomeDrop:
		f.mu.Lock()
		f.dropped++
		logger := f.logger
		f.mu.Unlock()
		logger.Warn("crux: dropped a JSON-RPC response that cannot be read", "reason", v.reason, "line", excerpt(line))
	}
	return nil
}

// tooLong answers a line longer than maxLine; prefix is its first maxLine
// bytes, where the id is looked for.
func (f *framer) tooLong(prefix []byte) {
	f.answer(prefix, errorReply(prefixID(prefix), jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("Invalid Request: the line is longer than %d bytes; it was skipped", f.maxLine)))
}

// answer writes the framer's reply to a bad line.
func (f *framer) answer(line, reply []byte) {
	f.mu.Lock()
	f.answered++
	logger := f.logger
	f.mu.Unlock()
	logger.Warn("crux: answered a malformed JSON-RPC line", "reply", string(reply), "line", excerpt(line))
	f.writeLine(append(reply, '\n'))
}

// writeLine writes one whole line to out. A failed write marks the output
// broken, which ends a drain: the replies it waits for cannot be written.
func (f *framer) writeLine(p []byte) (int, error) {
	f.wmu.Lock()
	n, err := f.out.Write(p)
	f.wmu.Unlock()
	if err != nil {
		f.mu.Lock()
		f.broken = true
		f.cond.Broadcast()
		f.mu.Unlock()
		f.cancelAllDirect()
	}
	return n, err
}

// framerWriter is the SDK's output: each Write is one message and its
// newline (ioConn.Write writes a message in one call). A reply to a call
// the framer handed on clears it from the pending calls before it is
// written, so the client may reuse its id as soon as it reads the reply.
type framerWriter struct{ f *framer }

func (w framerWriter) Write(p []byte) (int, error) {
	if id, ok := replyID(p); ok {
		w.f.replied(id)
	}
	return w.f.writeLine(p)
}

// replied clears id (int64 or string) from the pending calls: its reply
// is about to be written.
func (f *framer) replied(id any) {
	f.mu.Lock()
	if f.pending[id] {
		delete(f.pending, id)
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

// Close does nothing: the transport does not own the output.
func (framerWriter) Close() error { return nil }

// replyID returns the id of a response the SDK writes, as jsonrpc.ID.Raw
// gives it (int64 or string). It reads the members in order and stops at
// the first that tells (the SDK writes jsonrpc, id, then method, result or
// error), so it does not scan a large result.
func replyID(p []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var id any
	haveID, response := false, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		switch t {
		case "method":
			return nil, false
		case "result", "error":
			response = true
			if haveID {
				return id, true
			}
			if err := skipValue(dec); err != nil {
				return nil, false
			}
		case "id":
			v, err := dec.Token()
			if err != nil {
				return nil, false
			}
			switch v := v.(type) {
			case string:
				id = v
			case json.Number:
				n, err := v.Int64()
				if err != nil {
					return nil, false
				}
				id = n
			default:
				return nil, false
			}
			haveID = true
			if response {
				return id, true
			}
		default:
			if err := skipValue(dec); err != nil {
				return nil, false
			}
		}
	}
	return id, haveID && response
}

// skipValue reads past the next value of dec.
func skipValue(dec *json.Decoder) error {
	var raw json.RawMessage
	return dec.Decode(&raw)
}

// trimSpace removes JSON whitespace from both ends of b.
func trimSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// excerpt is the start of a line, for a log record.
func excerpt(line []byte) string {
	const n = 200
	if len(line) > n {
		return string(line[:n]) + "..."
	}
	return string(line)
}
