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
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/crux-go/crux/internal/codec"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the framing layer (see "Malformed input" in the package
// documentation).
const (
	// maxLineLength bounds a line of input, without its newline. It is the
	// SDK's own default, mcp.DefaultMaxLineLength: 16 MiB.
	maxLineLength = mcp.DefaultMaxLineLength
	// maxDepth bounds the nesting of a message, as the SDK's JSON decoder
	// does (internal/json.checkMaxDepth of go-sdk v1.8.0).
	maxDepth = 1000
	// maxIntegerID bounds the magnitude of a numeric id: 2^53-1, the largest
	// integer the SDK reads exactly (it decodes ids as float64).
	maxIntegerID = 1<<53 - 1
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

// Outcomes of check.
const (
	outcomePass   = iota // hand the line to the SDK
	outcomeAnswer        // answer it with verdict.reply
	outcomeDrop          // a response of the client that the SDK cannot read: drop it
)

// A verdict is check's decision on a line.
type verdict struct {
	outcome int
	call    bool            // pass: a request with an id, which the SDK will answer
	id      any             // pass: the id of the call (int64 or string)
	msg     jsonrpc.Message // pass: the message, as the SDK decodes it
	reply   []byte          // answer: the reply, without newline
	reason  string          // drop: why
}

// message holds the members of a JSON-RPC message object that check reads.
type message struct {
	jsonrpc, id, method, params, result, error json.RawMessage
	dup                                        string // a member named twice, if any
}

// check decides what becomes of one trimmed, non-empty line.
//
//   - Not JSON (a syntax error, a NaN, bytes after the value): -32700, id
//     null.
//   - A batch (an array): not supported in any protocol version. An empty
//     array is answered with one -32600, id null; otherwise the reply is an
//     array with one -32600 per element that is a call (with its id) or is
//     not a message (id null), or, when that leaves none, one -32600 with
//     id null. Nothing in the batch runs.
//   - Nesting deeper than maxDepth, not an object, no "jsonrpc":"2.0", a
//     member named twice, an id that is not a string or an integer of at
//     most 2^53-1 written without fraction or exponent, a "method" that is
//     not a string, "params" that are not an object or an array, or neither
//     "method" nor "result" nor "error": -32600, with the id when it is a
//     string or a number, else null.
//   - A response of the client ("result" or "error", no "method") is never
//     answered: passed on when the SDK can read it, else dropped.
//   - Anything else is passed on, if the SDK reads it as check does (the
//     same kind of message and the same id); else -32600.
func check(line []byte) verdict {
	if err := syntaxError(line); err != nil {
		return answerWith(nil, jsonrpc.CodeParseError, "Parse error: "+err.Error())
	}
	if line[0] == '[' {
		return checkBatch(line)
	}
	if line[0] != '{' {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC message object")
	}
	m := readMessage(line)
	id := echoID(m.id)
	if m.dup == "id" {
		id = nil
	}
	if m.method == nil && (m.result != nil || m.error != nil) {
		return checkResponse(line, m)
	}
	if tooDeep(line) {
		return answerWith(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: nested deeper than %d levels", maxDepth))
	}
	if m.dup != "" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: member %q appears more than once", m.dup))
	}
	if reason := checkVersion(m.jsonrpc); reason != "" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+reason)
	}
	if m.id != nil {
		if reason := checkID(m.id); reason != "" {
			return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+reason)
		}
	}
	if m.method == nil {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: no "method" (and not a response: no "result" or "error")`)
	}
	if m.method[0] != '"' {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: "method" must be a string`)
	}
	if m.params != nil && m.params[0] != '{' && m.params[0] != '[' && string(m.params) != "null" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: "params" must be an object or an array`)
	}
	if req, ok := plainRequest(line, m); ok {
		if !req.ID.IsValid() {
			return verdict{outcome: outcomePass, msg: req}
		}
		return verdict{outcome: outcomePass, call: true, id: req.ID.Raw(), msg: req}
	}
	// The SDK must read the line as a request with the same id.
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.ID.IsValid() != (m.id != nil) || req.ID.IsValid() && req.ID.Raw() != idValue(m.id) {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: the message cannot be read unambiguously")
	}
	if !req.ID.IsValid() {
		return verdict{outcome: outcomePass, msg: req}
	}
	return verdict{outcome: outcomePass, call: true, id: req.ID.Raw(), msg: req}
}

// plainRequest builds the request of a line that check has found to be a
// well-formed request, from the members it read, when the line is plain:
// valid UTF-8, a method name without escapes and params that are not
// null. For such a line it is the message jsonrpc.DecodeMessage returns
// (a test holds them equal), without the SDK decoder's two passes, each of
// which zeroes a 32 KiB buffer. For any other line it reports false, and
// check asks the SDK's decoder.
func plainRequest(line []byte, m message) (*jsonrpc.Request, bool) {
	if !utf8.Valid(line) || bytes.IndexByte(m.method, '\\') >= 0 || string(m.params) == "null" {
		return nil, false
	}
	// The params are copied: the line may be the reader's buffer.
	req := &jsonrpc.Request{Method: string(m.method[1 : len(m.method)-1]), Params: bytes.Clone(m.params)}
	if m.id != nil {
		var v any = idValue(m.id)
		if n, ok := v.(int64); ok {
			v = float64(n) // as the SDK's decoder reads a number; exact up to 2^53
		}
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			return nil, false
		}
		req.ID = id
	}
	return req, true
}

// checkResponse decides on a response of the client: passed on when the
// SDK reads it as a response with a valid id, else dropped. A response is
// never answered: an error answer to an error response could start an
// endless exchange with a client that answers what it cannot read.
func checkResponse(line []byte, m message) verdict {
	if m.dup != "" {
		return verdict{outcome: outcomeDrop, reason: fmt.Sprintf("member %q appears more than once", m.dup)}
	}
	if reason := checkVersion(m.jsonrpc); reason != "" {
		return verdict{outcome: outcomeDrop, reason: reason}
	}
	if m.id == nil || checkID(m.id) != "" {
		return verdict{outcome: outcomeDrop, reason: "a response without a string or integer id"}
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return verdict{outcome: outcomeDrop, reason: err.Error()}
	}
	if resp, ok := msg.(*jsonrpc.Response); !ok || resp.ID.Raw() != idValue(m.id) {
		return verdict{outcome: outcomeDrop, reason: "the message cannot be read unambiguously"}
	}
	return verdict{outcome: outcomePass, msg: msg}
}

// checkBatch answers a batch (see check).
func checkBatch(line []byte) verdict {
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil || len(elems) == 0 {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
	}
	const msg = "Invalid Request: batches are not supported; send one message per line"
	var replies []json.RawMessage
	for _, e := range elems {
		var id json.RawMessage
		if e[0] == '{' {
			m := readMessage(e)
			switch {
			case m.method == nil && (m.result != nil || m.error != nil):
				continue // a response: never answered
			case m.method != nil && m.id == nil:
				continue // a notification
			case m.dup != "id":
				id = echoID(m.id)
			}
		}
		replies = append(replies, errorReply(id, jsonrpc.CodeInvalidRequest, msg))
	}
	if len(replies) == 0 {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, msg)
	}
	data, err := json.Marshal(replies)
	if err != nil { // cannot happen: every element is a reply built by errorReply
		return answerWith(nil, jsonrpc.CodeInvalidRequest, msg)
	}
	return verdict{outcome: outcomeAnswer, reply: data}
}

// checkVersion returns why a "jsonrpc" member is wrong, or "".
func checkVersion(raw json.RawMessage) string {
	if string(raw) == `"2.0"` {
		return ""
	}
	var v string
	if raw == nil || json.Unmarshal(raw, &v) != nil || v != "2.0" {
		return `"jsonrpc" must be "2.0"`
	}
	return ""
}

// checkID returns why an id is not one the SDK reads exactly, or "". MCP
// forbids null; the SDK reads a number as a float64 and converts it to an
// int64, so only integers of at most 2^53-1, written as such, keep their
// value.
func checkID(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return ""
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxIntegerID || n < -maxIntegerID {
			return fmt.Sprintf(`"id" must be a string or an integer of at most %d in magnitude, without fraction or exponent`, int64(maxIntegerID))
		}
		return ""
	}
	return `"id" must be a string or an integer (null is not allowed in MCP)`
}

// idValue is the value of a valid id as jsonrpc.ID.Raw gives it.
func idValue(raw json.RawMessage) any {
	if raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		return s
	}
	n, _ := strconv.ParseInt(string(raw), 10, 64)
	return n
}

// idText is an id as it appears in a message.
func idText(id any) string {
	data, _ := json.Marshal(id)
	return string(data)
}

// echoID returns an id that may be sent back as it came: a string or a
// number. Other values (null, an object, an array, a boolean) cannot be,
// and give nil (null).
func echoID(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	switch raw[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return raw
	}
	return nil
}

// readMessage reads the members of a valid JSON object that check looks
// at. Names are compared exactly, after unescaping, as the SDK does. The
// values are slices of obj.
func readMessage(obj []byte) message {
	var m message
	members(obj, func(name, raw []byte) bool {
		key := name
		if bytes.IndexByte(name, '\\') >= 0 {
			quoted := make([]byte, 0, len(name)+2)
			quoted = append(append(append(quoted, '"'), name...), '"')
			var s string
			if json.Unmarshal(quoted, &s) != nil {
				return true
			}
			key = []byte(s)
		}
		var slot *json.RawMessage
		switch string(key) {
		case "jsonrpc":
			slot = &m.jsonrpc
		case "id":
			slot = &m.id
		case "method":
			slot = &m.method
		case "params":
			slot = &m.params
		case "result":
			slot = &m.result
		case "error":
			slot = &m.error
		default:
			return true
		}
		if *slot != nil && m.dup == "" {
			m.dup = string(key)
		}
		*slot = raw
		return true
	})
	return m
}

// prefixID returns the id of a message from the start of its line, when a
// top-level "id" member with a string or number value comes before the
// line is cut off or goes wrong; else nil.
func prefixID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	depth := 1
	key := true // at depth 1, the next token is a member name
	for {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if depth == 1 && key {
			if t == json.Delim('}') {
				return nil
			}
			if t == "id" {
				off := dec.InputOffset()
				v, err := dec.Token()
				if err != nil {
					return nil
				}
				switch v.(type) {
				case float64:
					if dec.InputOffset() >= int64(len(prefix)) {
						return nil // the number may go on past the cut
					}
				case string:
				default:
					return nil
				}
				return echoID(bytes.TrimLeft(prefix[off:dec.InputOffset()], " \t\r\n:"))
			}
			key = false
			continue
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 1 {
			key = true // a value at depth 1 ended
		}
	}
}

// syntaxError reports whether line is one JSON value and nothing else, as
// the SDK's decoder requires, and why not.
func syntaxError(line []byte) error {
	if json.Valid(line) {
		return nil
	}
	var raw json.RawMessage
	err := json.Unmarshal(line, &raw)
	if err == nil {
		err = errors.New("not a JSON value")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%v (at byte %d)", se, se.Offset)
	}
	return err
}

// tooDeep reports whether a valid JSON text nests deeper than maxDepth,
// counted as the SDK counts it.
func tooDeep(data []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// answerWith is a verdict that answers with an error reply.
func answerWith(id json.RawMessage, code int64, msg string) verdict {
	return verdict{outcome: outcomeAnswer, reply: errorReply(id, code, msg)}
}

// errorReply is a JSON-RPC error response; a nil id is null.
func errorReply(id json.RawMessage, code int64, msg string) []byte {
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	if err != nil { // cannot happen: id is a valid JSON string or number, or nil
		panic("mcpserver: encoding an error reply: " + err.Error())
	}
	return data
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

// stdioTransport is the transport StdioTransport returns: a connection
// over a framer.
type stdioTransport struct{ f *framer }

// errConnected is the error of a second Connect.
var errConnected = errors.New("mcpserver: a StdioTransport connects only once")

// Connect starts reading the input and returns the connection over the
// framer.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.f.mu.Lock()
	connected := t.f.connected
	t.f.connected = true
	t.f.mu.Unlock()
	if connected {
		return nil, errConnected
	}
	t.f.start()
	return &framerConn{f: t.f}, nil
}

// framerConn is the SDK's connection over a framer. It does what the SDK's
// own newline-delimited connection (mcp.IOTransport) does, less the
// decoding: the framer has checked each line with the SDK's decoder
// already, and Read returns the message it made, so a message is decoded
// once, not three times (the SDK's reader decodes each line with
// json.Decoder, then twice more, each time zeroing a 32 KiB buffer).
// Write encodes a message with the SDK's encoder and writes it as one
// line; a reply clears its call from the framer's pending calls first.
// Batches, which the SDK's connection also handles, never reach it: the
// framer answers them.
type framerConn struct{ f *framer }

func (c *framerConn) Read(ctx context.Context) (jsonrpc.Message, error) { return c.f.next(ctx) }

func (c *framerConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, _ := msg.(*jsonrpc.Response)
	line, err := encodeLine(msg, resp)
	if err != nil {
		return err
	}
	if resp != nil && resp.ID.IsValid() {
		c.f.replied(resp.ID.Raw())
	}
	_, err = c.f.writeLine(line)
	return err
}

// encodeLine is the line jsonrpc.EncodeMessage(msg) and a newline make. A
// response with a result is written directly, the result spliced in as it
// is between the members the encoder writes: the SDK marshals every result
// with its own encoder (jsonrpc2.NewResponse), so it is compact and valid,
// and the encoder's pass over it would change nothing (a test holds the
// two equal). That pass costs more than the rest of the write: about 5 ns
// a byte of the answer. A result holding a newline, which no compact
// encoding does, goes through the encoder.
func encodeLine(msg jsonrpc.Message, resp *jsonrpc.Response) ([]byte, error) {
	if resp != nil && resp.Error == nil && len(resp.Result) > 0 && resp.ID.IsValid() && bytes.IndexByte(resp.Result, '\n') < 0 {
		if id, err := codec.MarshalNoEscape(resp.ID.Raw()); err == nil {
			line := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(resp.Result)+1)
			line = append(line, `{"jsonrpc":"2.0","id":`...)
			line = append(line, id...)
			line = append(line, `,"result":`...)
			line = append(line, resp.Result...)
			return append(line, "}\n"...), nil
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func (c *framerConn) Close() error { return c.f.Close() }

func (c *framerConn) SessionID() string { return "" }

// serve runs s over t until the input ends or ctx is done. When ctx is
// done, the framer stops reading; the calls it has read run to completion
// and their replies are written before serve returns ctx.Err(). The
// SDK's own handling of a done context (ServerSession.Close) would drop
// those replies: the jsonrpc2 connection refuses every write once it is
// closing.
func (t *stdioTransport) serve(ctx context.Context, s *mcp.Server, a *adapter) error {
	stop := context.AfterFunc(ctx, t.f.stop)
	defer stop()
	err := t.run(context.WithoutCancel(ctx), s, a)
	if err == nil && t.f.stoppedByStop() {
		return ctx.Err()
	}
	return err
}

// run is s.Run(ctx, t), logging as it does, with the framer's direct path
// (see direct.go) for the tools/call of a's handlers; without an adapter,
// every message goes to the SDK. It returns once the SDK's session has
// ended and every direct call has written its answer.
func (t *stdioTransport) run(ctx context.Context, s *mcp.Server, a *adapter) error {
	if a == nil {
		return s.Run(ctx, t)
	}
	a.logger.Info("server run start")
	ss, err := s.Connect(ctx, t, nil)
	if err != nil {
		a.logger.Error("server connect failed", "error", err)
		return err
	}
	t.f.direct.Store(&directPath{ctx: ctx, a: a, session: ss})
	err = ss.Wait()
	t.f.wg.Wait()
	if err != nil {
		a.logger.Error("server session ended with error", "error", err)
	} else {
		a.logger.Info("server session ended")
	}
	return err
}
