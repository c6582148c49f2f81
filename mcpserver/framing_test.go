package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the complete lines written so far.
func (s *syncBuffer) lines() []string {
	text := s.String()
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		return strings.Split(text[:i], "\n")
	}
	return nil
}

// reply is a JSON-RPC response as the tests read it.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseReply decodes one line of output as a single response.
func parseReply(t testing.TB, line string) reply {
	t.Helper()
	var r reply
	require.NoError(t, json.Unmarshal([]byte(line), &r), "%s", line)
	return r
}

func TestCheck(t *testing.T) {
	deep := func(n int) string {
		return `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}}"
	}
	for _, tc := range []struct {
		name, line string
		outcome    int
		code       int64  // answer: the error code
		id         string // answer: the id of the reply; pass: the call's id
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, outcomePass, 0, "1"},
		{"string id", `{"jsonrpc":"2.0","id":"a\u0062","method":"ping"}`, outcomePass, 0, `"ab"`},
		{"negative id", `{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}`, outcomePass, 0, "-9007199254740991"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, outcomePass, 0, ""},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, outcomePass, 0, "1"},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, outcomePass, 0, ""},
		{"error response", `{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`, outcomePass, 0, ""},
		{"depth 1000", deep(998), outcomePass, 0, "7"},

		{"bad json", `{bad json`, outcomeAnswer, -32700, "null"},
		{"NaN", `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":NaN}}`, outcomeAnswer, -32700, "null"},
		{"NUL after the object", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\x00", outcomeAnswer, -32700, "null"},
		{"two objects", `{"jsonrpc":"2.0","id":3,"method":"ping"} {}`, outcomeAnswer, -32700, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":3,"method":"pi`, outcomeAnswer, -32700, "null"},
		{"depth 1001", deep(999), outcomeAnswer, -32600, "7"},
		{"no jsonrpc", `{"id":4,"method":"ping"}`, outcomeAnswer, -32600, "4"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"4","method":"ping"}`, outcomeAnswer, -32600, `"4"`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, outcomeAnswer, -32600, "null"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, outcomeAnswer, -32600, "null"},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, outcomeAnswer, -32600, "null"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, outcomeAnswer, -32600, "null"},
		{"fraction id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, outcomeAnswer, -32600, "1.5"},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, outcomeAnswer, -32600, "1e3"},
		{"id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, outcomeAnswer, -32600, "9007199254740993"},
		{"duplicate id member", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, outcomeAnswer, -32600, "null"},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"x"}`, outcomeAnswer, -32600, "1"},
		{"method not a string", `{"jsonrpc":"2.0","id":5,"method":5}`, outcomeAnswer, -32600, "5"},
		{"params a string", `{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}`, outcomeAnswer, -32600, "5"},
		{"no method", `{"jsonrpc":"2.0","id":6}`, outcomeAnswer, -32600, "6"},
		{"scalar", `42`, outcomeAnswer, -32600, "null"},
		{"string", `"ping"`, outcomeAnswer, -32600, "null"},
		{"empty batch", `[]`, outcomeAnswer, -32600, "null"},

		{"response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, outcomeDrop, 0, ""},
		{"response with a bad error", `{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`, outcomeDrop, 0, ""},
		{"response without jsonrpc", `{"id":1,"result":{}}`, outcomeDrop, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := check([]byte(tc.line))
			require.Equal(t, tc.outcome, v.outcome, "%s", v.reply)
			switch tc.outcome {
			case outcomeAnswer:
				r := parseReply(t, string(v.reply))
				require.NotNil(t, r.Error)
				assert.Equal(t, tc.code, r.Error.Code, r.Error.Message)
				assert.Equal(t, tc.id, string(r.ID))
			case outcomePass:
				if tc.id == "" {
					assert.False(t, v.call)
					return
				}
				assert.True(t, v.call)
				assert.Equal(t, tc.id, idText(v.id))
			}
		})
	}
}

func TestCheckBatch(t *testing.T) {
	v := check([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"r","result":{}},5,{"jsonrpc":"2.0","id":{},"method":"ping"}]`))
	require.Equal(t, outcomeAnswer, v.outcome)
	var replies []reply
	require.NoError(t, json.Unmarshal(v.reply, &replies), "%s", v.reply)
	require.Len(t, replies, 3, "the call and the two elements that are not messages; not the notification or the response")
	for i, id := range []string{"1", "null", "null"} {
		assert.Equal(t, id, string(replies[i].ID))
		assert.Equal(t, int64(-32600), replies[i].Error.Code)
		assert.Contains(t, replies[i].Error.Message, "batches are not supported")
	}

	// Nothing to answer element by element: one error.
	v = check([]byte(`[{"jsonrpc":"2.0","method":"n"}]`))
	require.Equal(t, outcomeAnswer, v.outcome)
	r := parseReply(t, string(v.reply))
	assert.Equal(t, "null", string(r.ID))
	assert.Equal(t, int64(-32600), r.Error.Code)
}

func TestPrefixID(t *testing.T) {
	for prefix, want := range map[string]string{
		`{"jsonrpc":"2.0","id":8,"method":"x","params":{"v":"aaaa`:   "8",
		`{"jsonrpc":"2.0","params":{"id":1,"v":[{"id":2}]},"id":"k"`: `"k"`,
		`{"jsonrpc":"2.0", "id" : -3 ,"params":"aaa`:                 "-3",
		`{"jsonrpc":"2.0","method":"x","params":{"v":"aaaa`:          "",
		`{"jsonrpc":"2.0","id":12`:                                   "", // the number may go on
		`{"jsonrpc":"2.0","id":{"a":1},"params":"aaa`:                "",
		`[{"id":1}`: "",
	} {
		assert.Equal(t, want, string(prefixID([]byte(prefix))), prefix)
	}
}

func TestReplyID(t *testing.T) {
	for line, want := range map[string]any{
		`{"jsonrpc":"2.0","id":5,"result":{"big":"…"}}` + "\n":          int64(5),
		`{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":""}}`: `a"b`,
		`{"jsonrpc":"2.0","result":{},"id":-7}`:                         int64(-7),
	} {
		id, ok := replyID([]byte(line))
		assert.True(t, ok, line)
		assert.Equal(t, want, id, line)
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
		`[{"jsonrpc":"2.0","id":5,"result":{}}]`,
		`{"jsonrpc":"2.0","id":5}`,
	} {
		_, ok := replyID([]byte(line))
		assert.False(t, ok, line)
	}
}

// sdkReader reads the framer's output as the SDK's ioConn does: one
// json.Decoder, each value followed by a newline or the end of the input,
// and each value decoded with jsonrpc.DecodeMessage. It answers every call
// through the framer's writer and returns the messages, or the first error
// the SDK would end the session with.
func sdkReader(f *framer, answer bool) ([]jsonrpc.Message, error) {
	dec := json.NewDecoder(f)
	var msgs []jsonrpc.Message
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		var tr [1]byte
		if n, _ := dec.Buffered().Read(tr[:]); n > 0 && tr[0] != '\n' && tr[0] != '\r' {
			return msgs, fmt.Errorf("invalid trailing data after %s", raw)
		}
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return msgs, fmt.Errorf("%w: %s", err, raw)
		}
		msgs = append(msgs, msg)
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && answer {
			data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)})
			if err != nil {
				return msgs, err
			}
			if _, err := (framerWriter{f}).Write(append(data, '\n')); err != nil {
				return msgs, err
			}
		}
	}
}

// runFramer runs a framer over input and a stand-in for the SDK that
// answers every call, and returns the framer, its output and the messages
// passed on. It fails the test if the stand-in would have ended the
// session or the framer does not reach the end of the input.
func runFramer(t testing.TB, input []byte, maxLine int) (*framer, *syncBuffer, []jsonrpc.Message) {
	t.Helper()
	out := &syncBuffer{}
	f := newFramer(io.NopCloser(bytes.NewReader(input)), out)
	f.maxLine = maxLine
	f.start()
	type result struct {
		msgs []jsonrpc.Message
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := sdkReader(f, true)
		done <- result{msgs, err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err, "the SDK would end the session")
		return f, out, r.msgs
	case <-time.After(20 * time.Second):
		t.Fatalf("the framer did not reach the end of the input %q", input)
		return nil, nil, nil
	}
}

func TestFramerSession(t *testing.T) {
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{bad json`,
		"",
		"  \t\r",
		`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\r",
		`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`  {"jsonrpc":"2.0","id":"last","method":"ping"}  `, // no newline: the end of the input ends it
	}, "\n")
	f, out, msgs := runFramer(t, []byte(input), maxLineLength)

	var ids []string
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			ids = append(ids, idText(req.ID.Raw()))
		}
	}
	assert.Equal(t, []string{"1", "2", `"last"`}, ids)
	assert.Equal(t, 4, f.passed)
	assert.Equal(t, 2, f.answered)
	assert.Equal(t, 1, f.dropped)
	assert.Empty(t, f.pending)

	lines := out.lines()
	require.Len(t, lines, 5, "three replies of the stand-in, two answers of the framer")
	var codes []int64
	for _, l := range lines {
		if strings.HasPrefix(l, "[") {
			var rs []reply
			require.NoError(t, json.Unmarshal([]byte(l), &rs))
			require.Len(t, rs, 1)
			assert.Equal(t, "3", string(rs[0].ID))
			codes = append(codes, rs[0].Error.Code)
			continue
		}
		if r := parseReply(t, l); r.Error != nil {
			codes = append(codes, r.Error.Code)
		}
	}
	assert.Equal(t, []int64{-32700, -32600}, codes)
}

// TestFramerLongLine: a line longer than the limit is answered once, with
// the id from its start, and skipped without being held whole; the line
// after it is read as usual.
func TestFramerLongLine(t *testing.T) {
	const maxLine = 1 << 20
	const longLen = 64 << 20
	head := `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"v":"`
	next := `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	in := io.MultiReader(
		strings.NewReader(head),
		io.LimitReader(repeatReader('a'), longLen),
		strings.NewReader("\"}}\n"+next),
	)
	out := &syncBuffer{}
	f := newFramer(io.NopCloser(in), out)
	f.maxLine = maxLine
	f.start()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msgs, err := sdkReader(f, true)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, int64(2), msgs[0].(*jsonrpc.Request).ID.Raw())
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20),
		"a %d-byte line is skipped with about %d bytes held", longLen, maxLine)

	lines := out.lines()
	require.Len(t, lines, 2)
	r := parseReply(t, lines[0])
	assert.Equal(t, `"big"`, string(r.ID))
	assert.Equal(t, int64(-32600), r.Error.Code)
	assert.Contains(t, r.Error.Message, "longer than 1048576 bytes")
	assert.Equal(t, "2", string(parseReply(t, lines[1]).ID))
}

// repeatReader reads as an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestFramerLineLimitExact: a line of exactly the limit is read; one byte
// more is answered.
func TestFramerLineLimitExact(t *testing.T) {
	const maxLine = 100
	mk := func(n int) string {
		s := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"v":"`
		return s + strings.Repeat("a", n-len(s)-3) + `"}}`
	}
	require.Len(t, mk(maxLine), maxLine)
	f, out, msgs := runFramer(t, []byte(mk(maxLine)+"\n"+mk(maxLine+1)+"\n"), maxLine)
	assert.Len(t, msgs, 1)
	assert.Equal(t, 1, f.answered)
	lines := out.lines()
	require.Len(t, lines, 2)
	var codes []int64
	for _, l := range lines {
		if r := parseReply(t, l); r.Error != nil {
			codes = append(codes, r.Error.Code)
		}
	}
	assert.Equal(t, []int64{-32600}, codes)
}

// pipeFramer returns a started framer reading from a pipe, its writer end
// and the framer's output.
func pipeFramer(t *testing.T) (*framer, *io.PipeWriter, *syncBuffer) {
	t.Helper()
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	f := newFramer(pr, out)
	f.start()
	t.Cleanup(func() { pw.Close(); f.Close() })
	return f, pw, out
}

// readLine reads one whole line from the framer as the SDK does, in small
// reads.
func readLine(t *testing.T, f *framer) string {
	t.Helper()
	var line []byte
	buf := make([]byte, 7)
	for !bytes.HasSuffix(line, []byte("\n")) {
		n, err := f.Read(buf)
		require.NoError(t, err)
		line = append(line, buf[:n]...)
	}
	return string(line)
}

// readResult is the outcome of one Read.
type readResult struct {
	n   int
	err error
}

// readAsync starts one Read of the framer.
func readAsync(f *framer) <-chan readResult {
	c := make(chan readResult, 1)
	go func() {
		n, err := f.Read(make([]byte, 64))
		c <- readResult{n, err}
	}()
	return c
}

// TestFramerDuplicateID: a call that reuses the id of a call in flight is
// answered with -32600 and id null (the SDK would send it no reply); once
// the first call is answered, the id is free again.
func TestFramerDuplicateID(t *testing.T) {
	f, pw, out := pipeFramer(t)
	call := `{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n"
	go pw.Write([]byte(call + call))
	assert.Equal(t, call, readLine(t, f))
	require.Eventually(t, func() bool { return len(out.lines()) == 1 }, 5*time.Second, time.Millisecond)
	r := parseReply(t, out.lines()[0])
	assert.Equal(t, "null", string(r.ID))
	assert.Equal(t, int64(-32600), r.Error.Code)
	assert.Contains(t, r.Error.Message, "request id 7 is already in use")

	_, err := framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"))
	require.NoError(t, err)
	go pw.Write([]byte(call))
	assert.Equal(t, call, readLine(t, f), "the id is free once its call is answered")
}

// TestFramerEOFWaitsForReplies: at the end of the input, Read reports it
// only once every call handed on has been answered.
func TestFramerEOFWaitsForReplies(t *testing.T) {
	f, pw, _ := pipeFramer(t)
	go func() {
		pw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":"b","method":"ping"}` + "\n"))
		pw.Close()
	}()
	readLine(t, f)
	readLine(t, f)
	eof := readAsync(f)
	_, err := framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	require.NoError(t, err)
	select {
	case r := <-eof:
		t.Fatalf("Read returned %v with call \"b\" unanswered", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	_, err = framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","id":"b","result":{}}` + "\n"))
	require.NoError(t, err)
	select {
	case r := <-eof:
		assert.Equal(t, io.EOF, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not report the end after the last reply")
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestFramerEOFWithBrokenOutput: when the output fails, the replies cannot
// be written, and the end of the input is reported without them.
func TestFramerEOFWithBrokenOutput(t *testing.T) {
	f := newFramer(io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")), failWriter{})
	f.start()
	readLine(t, f)
	eof := readAsync(f)
	_, err := framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/message"}` + "\n"))
	require.Error(t, err)
	select {
	case r := <-eof:
		assert.Equal(t, io.EOF, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("Read waits for replies that cannot be written")
	}
}

// TestFramerStopDuringRead: stop while the pump waits for input ends the
// input at once (after the replies); what that read returns later is not
// taken.
func TestFramerStopDuringRead(t *testing.T) {
	f, pw, out := pipeFramer(t)
	go pw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
	readLine(t, f)
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.reading
	}, 5*time.Second, time.Millisecond, "the pump waits for more input")
	f.stop()
	eof := readAsync(f)
	select {
	case r := <-eof:
		t.Fatalf("Read returned %v with call 1 unanswered", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	_, err := framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	require.NoError(t, err)
	r := <-eof
	assert.Equal(t, io.EOF, r.err)
	assert.True(t, f.stoppedByStop())

	// The abandoned read gets a line: neither passed on nor answered.
	_, err = pw.Write([]byte("{bad json\n"))
	require.NoError(t, err)
	n, err := f.Read(make([]byte, 64))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	assert.Len(t, out.lines(), 1, "only the reply")
	assert.Equal(t, 0, f.answered)
}

// TestFramerStopKeepsReadLines: lines read before stop are still handed
// on; the part of a line not yet complete is not taken.
func TestFramerStopKeepsReadLines(t *testing.T) {
	f, pw, out := pipeFramer(t)
	a := `{"jsonrpc":"2.0","id":"a","method":"ping"}` + "\n"
	b := `{"jsonrpc":"2.0","id":"b","method":"ping"}` + "\n"
	wrote := make(chan struct{})
	go func() { pw.Write([]byte(a + b + `{bad`)); close(wrote) }()
	<-wrote // the pump has read it all
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.reading
	}, 5*time.Second, time.Millisecond, "the pump has finished its read and waits to hand on a")
	f.stop()
	assert.Equal(t, a, readLine(t, f))
	assert.Equal(t, b, readLine(t, f))
	for _, id := range []string{`"a"`, `"b"`} {
		_, err := framerWriter{f}.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n"))
		require.NoError(t, err)
	}
	n, err := f.Read(make([]byte, 64))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	assert.True(t, f.stoppedByStop())
	assert.Equal(t, 0, f.answered, "the cut-off {bad is not answered")
	assert.Len(t, out.lines(), 2)
}

// TestFramerWritesWholeLines: the SDK's replies and the framer's answers
// share the output and never interleave within a line.
func TestFramerWritesWholeLines(t *testing.T) {
	out := &chunkWriter{}
	var in strings.Builder
	const n = 200
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":"%s"}}`+"\n", i, strings.Repeat("x", i*10))
		in.WriteString("{bad json\n")
	}
	f := newFramer(io.NopCloser(strings.NewReader(in.String())), out)
	f.start()
	var wg sync.WaitGroup
	dec := json.NewDecoder(f)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			require.Equal(t, io.EOF, err)
			break
		}
		msg, err := jsonrpc.DecodeMessage(raw)
		require.NoError(t, err)
		wg.Add(1)
		go func() { // replies written concurrently, as the SDK does
			defer wg.Done()
			echo, _ := json.Marshal(map[string]string{"echo": string(raw)})
			data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: msg.(*jsonrpc.Request).ID, Result: echo})
			framerWriter{f}.Write(append(data, '\n'))
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2*n)
	for _, l := range lines {
		assert.True(t, json.Valid([]byte(l)), "%.80s", l)
	}
}

// chunkWriter writes a line in several pieces, yielding between them, so
// that writes of two lines at once would interleave.
type chunkWriter struct{ syncBuffer }

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), 16)
		w.syncBuffer.Write(p[:k])
		p = p[k:]
		runtime.Gosched()
	}
	return n, nil
}

// TestStdioTransportStopFinishesCalls: when the context of Serve ends, the
// transport reads no more, lets the calls it has read finish and writes
// their replies, then Serve returns the context's error. The SDK on its
// own would drop the replies.
func TestStdioTransportStopFinishesCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v"}, nil)
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	inR, inW := io.Pipe()
	out := &syncBuffer{}
	st := StdioTransport(inR, out).(*stdioTransport)
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.serve(serveCtx, s, nil) }()

	send := func(line string) {
		_, err := inW.Write([]byte(line + "\n"))
		require.NoError(t, err)
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"v"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}`)
	<-started
	<-started
	stop()
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v with two calls running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("Serve did not return after the calls finished")
	}
	ids := map[string]bool{}
	for _, l := range out.lines() {
		r := parseReply(t, l)
		require.Nil(t, r.Error, "%s", l)
		ids[string(r.ID)] = true
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true}, ids)
	inW.Close()
}

// TestStdioTransportConnectsOnce: a second Connect is refused.
func TestStdioTransportConnectsOnce(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	tr := StdioTransport(pr, io.Discard)
	c, err := tr.Connect(context.Background())
	require.NoError(t, err)
	defer c.Close()
	_, err = tr.Connect(context.Background())
	assert.ErrorIs(t, err, errConnected)
}

// fuzzMaxLine is the line limit of FuzzFraming: small, so that fuzzing
// reaches long lines, and above 2*maxDepth, so that it reaches deep ones.
const fuzzMaxLine = 4096

// FuzzFraming feeds arbitrary bytes, then a final ping on a line of its
// own, to a framer whose SDK stand-in reads the lines passed on exactly as
// the SDK does and answers every call. Invariants: nothing panics; the
// stand-in never meets a message the SDK would end the session on; every
// non-blank line is answered once, passed on or (a response of the client
// the SDK cannot read) dropped; every line of output is a whole JSON
// value; every answer is -32700 or -32600; the final ping is passed on and
// the input's end is reported.
func FuzzFraming(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		const final = `{"jsonrpc":"2.0","id":"fuzz-final","method":"ping"}`
		input := append(append(bytes.Clone(data), '\n'), final+"\n"...)
		for _, l := range bytes.Split(data, []byte("\n")) {
			requireSDKMessage(t, l) // what is passed on is the SDK decoder's message
		}
		fr, out, msgs := runFramer(t, input, fuzzMaxLine)

		want := 0
		for _, l := range bytes.Split(bytes.TrimSuffix(input, []byte("\n")), []byte("\n")) {
			if len(l) > fuzzMaxLine || len(trimSpace(l)) > 0 {
				want++
			}
		}
		fr.mu.Lock()
		answered, passed, dropped, pending := fr.answered, fr.passed, fr.dropped, len(fr.pending)
		fr.mu.Unlock()
		if answered+passed+dropped != want {
			t.Fatalf("%d lines: %d answered, %d passed on, %d dropped", want, answered, passed, dropped)
		}
		if passed != len(msgs) {
			t.Fatalf("%d lines passed on, %d read by the SDK", passed, len(msgs))
		}
		if pending != 0 {
			t.Fatalf("%d calls left pending", pending)
		}
		last, ok := msgs[len(msgs)-1].(*jsonrpc.Request)
		if !ok || last.ID.Raw() != "fuzz-final" {
			t.Fatalf("the final ping was not passed on last: %#v", msgs[len(msgs)-1])
		}

		answers := 0
		for _, l := range out.lines() {
			if !json.Valid([]byte(l)) {
				t.Fatalf("output line is not JSON: %q", l)
			}
			var rs []reply
			if strings.HasPrefix(l, "[") {
				if err := json.Unmarshal([]byte(l), &rs); err != nil || len(rs) == 0 {
					t.Fatalf("batch answer %q: %v", l, err)
				}
			} else {
				rs = []reply{parseReply(t, l)}
				if rs[0].Error == nil {
					continue // the stand-in's reply
				}
			}
			answers++
			for _, r := range rs {
				if r.Error == nil || r.Error.Code != jsonrpc.CodeParseError && r.Error.Code != jsonrpc.CodeInvalidRequest {
					t.Fatalf("answer %q", l)
				}
			}
		}
		if answers != answered {
			t.Fatalf("%d answers written, %d counted", answers, answered)
		}
	})
}
