package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store/bolt"
)

// scriptedBackend answers each tool name with a fixed outcome, covering
// every kind the adapter maps. Its results are built anew for every call.
type scriptedBackend struct {
	started chan string // the name of each call that starts, if not nil
}

func (*scriptedBackend) ListTools(context.Context, crux.Caller) ([]crux.Tool, error) {
	return nil, nil
}

func (b *scriptedBackend) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	if b.started != nil {
		b.started <- name
	}
	text := func(s string) []crux.Content { return []crux.Content{{Type: "text", Text: s}} }
	switch name {
	case "ok":
		return &crux.Result{
			Content:           text("a <b> & \"c\"\n\u2028 é \x01"),
			StructuredContent: map[string]any{"z": []any{1.5, "<x>", nil}, "a": map[string]any{"n": 3}},
			Meta:              map[string]any{"crux": map[string]any{"receipt": "r&1"}},
		}, nil
	case "echo": // what the call was given
		return &crux.Result{
			Content:           text(string(args)),
			StructuredContent: map[string]any{"args": json.RawMessage(orNull(args)), "agent": c.Agent, "raw_len": len(args)},
		}, nil
	case "struct":
		return &crux.Result{Content: text("two"), StructuredContent: struct {
			B string `json:"b"`
			A []int  `json:"a,omitempty"`
		}{B: "x<y"}}, nil
	case "nil":
		return nil, nil
	case "empty":
		return &crux.Result{Meta: map[string]any{}}, nil
	case "several":
		return &crux.Result{Content: append(text("one"), crux.Content{Type: "text", Text: ""}), StructuredContent: []any{}}, nil
	case "tool_error":
		return &crux.Result{Content: text("no such fact"), IsError: true, StructuredContent: map[string]any{"error": "not_found"}}, nil
	case "bad_arg":
		return nil, &crux.Error{Code: crux.CodeInvalidParams, Message: "top_k: want an integer <= 50", Data: map[string]any{"param": "top_k", "reason": "type"}}
	case "bad_arg_no_data":
		return nil, &crux.Error{Code: crux.CodeInvalidParams, Message: "query: missing"}
	case "denied":
		return nil, &crux.Error{Code: crux.CodeCapabilityDenied, Message: "denied & logged", Data: map[string]any{"reason_code": "scope", "receipt": map[string]any{"id": "<r>"}}}
	case "unknown":
		return nil, &crux.Error{Code: crux.CodeMethodNotFound, Message: `unknown tool "unknown"`, Data: "dropped"}
	case "internal":
		return nil, fmt.Errorf("wrapped: %w", &crux.Error{Code: crux.CodeInternalError, Message: "disk on fire"})
	case "plain_error":
		return nil, errors.New("not a crux error")
	case "bad_data":
		return nil, &crux.Error{Code: crux.CodeConflict, Message: "conflict", Data: func() {}}
	case "block": // until cancelled
		<-ctx.Done()
		return &crux.Result{Content: text("stopped: " + context.Cause(ctx).Error())}, nil
	}
	return nil, &crux.Error{Code: crux.CodeMethodNotFound, Message: fmt.Sprintf("unknown tool %q", name)}
}

func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

// session is one run of Serve's stdio path over pipes, with the direct
// path on or off (every message then goes to the SDK, as before it).
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *syncBuffer
	f    *framer
	done chan error
}

func startSession(t *testing.T, ctx context.Context, b Backend, direct bool) *session {
	t.Helper()
	inR, inW := io.Pipe()
	s := &session{t: t, in: inW, out: &syncBuffer{}, done: make(chan error, 1)}
	st := StdioTransport(inR, s.out).(*stdioTransport)
	s.f = st.f
	srv, a := newServer(b, crux.Caller{Agent: "alice", Authenticated: true}, nil)
	if !direct {
		a = nil
	}
	go func() { s.done <- st.serve(ctx, srv, a) }()
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	_, err := io.WriteString(s.in, line+"\n")
	require.NoError(s.t, err)
}

// replies returns the replies written so far, by id as written.
func (s *session) replies() map[string]string {
	out := map[string]string{}
	for _, l := range s.out.lines() {
		out[string(parseReply(s.t, l).ID)] = l
	}
	return out
}

// await waits for the reply to the call of the given id (as written).
func (s *session) await(id string) string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if l, ok := s.replies()[id]; ok {
			return l
		}
		time.Sleep(time.Millisecond)
	}
	s.t.Fatalf("no reply to %s; output:\n%s", id, s.out.String())
	return ""
}

// close ends the input and waits for Serve, which must return nil.
func (s *session) close() {
	s.t.Helper()
	s.in.Close()
	select {
	case err := <-s.done:
		require.NoError(s.t, err)
	case <-time.After(20 * time.Second):
		s.t.Fatal("Serve did not return after the input ended")
	}
}

func initLine(version string) string {
	return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"c","version":"v"}}}`
}

// callLine is a tools/call with the given id and params.
func callLine(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// parityCalls are the calls TestDirectPathIsTheSDKs sends, each with
// whether the direct path takes it.
var parityCalls = []struct {
	params string
	direct bool
}{
	{`{"name":"ok"}`, true},
	{`{"name":"ok","arguments":{"x":1}}`, true},
	{`{"name":"echo","arguments":{ "q" : "a<b" , "n":[1, 2.50, {"d":null}]	}}`, true},
	{`{"name":"echo"}`, true},
	{`{"name":"echo","arguments":{},"_meta":{"progressToken":7}}`, true},
	{` { "arguments" : {"k":"v"} , "name" : "echo" } `, true},
	{`{"name":"struct"}`, true},
	{`{"name":"nil"}`, true},
	{`{"name":"empty"}`, true},
	{`{"name":"several"}`, true},
	{`{"name":"tool_error"}`, true},
	{`{"name":"bad_arg","arguments":{"top_k":"ten"}}`, true},
	{`{"name":"bad_arg_no_data"}`, true},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`, true},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}`, true},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":7}}`, true},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":""}}`, true},
	{`{"name":"denied"}`, true},
	{`{"name":"unknown"}`, true},
	{`{"name":"internal"}`, true},
	{`{"name":"plain_error"}`, true},
	{`{"name":"bad_data"}`, true},
	{`{"name":"no_such_tool"}`, true},
	{`{"name":""}`, true},
	{`{"name":"caf\u00e9"}`, false},
	{`{"name":"unicodé"}`, true},
	// The SDK's alone.
	{`{}`, false},
	{`{"name":5}`, false},
	{`{"name":null}`, false},
	{`{"name":"ok","arguments":[1]}`, false},
	{`{"name":"echo","arguments":null}`, false},
	{`{"name":"echo","arguments":"x"}`, false},
	{`{"name":"ok","name":"echo"}`, false},
	{`{"Name":"ok"}`, false},
	{`{"n\u0061me":"ok"}`, false},
	{`{"name":"ok","task":{}}`, false},
	{`{"name":"ok","_meta":5}`, false},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`, false},
	{`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, false},
	{`[]`, false},
}

// runParity sends every parity call, with numeric and string ids, on a
// session of version, and returns the replies by id and how many calls
// the direct path answered.
func runParity(t *testing.T, version string, direct bool) (map[string]string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startSession(t, ctx, &scriptedBackend{}, direct)
	// Before initialize, the SDK refuses a call.
	s.send(callLine(`"early"`, `{"name":"ok"}`))
	s.await(`"early"`)
	s.send(initLine(version))
	s.await(`"init"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, c := range parityCalls {
		s.send(callLine(fmt.Sprint(i+1), c.params))
		s.send(callLine(fmt.Sprintf(`"s\u0041%d"`, i), c.params))
	}
	s.send(callLine(`"<&>"`, `{"name":"ok"}`))
	s.send(callLine(`-9007199254740991`, `{"name":"ok"}`))
	s.send(`{"jsonrpc":"2.0","id":"params-missing","method":"tools/call"}`)
	s.send(`{"jsonrpc":"2.0","id":"params-null","method":"tools/call","params":null}`)
	s.close()
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	require.Empty(t, s.f.pending)
	require.Empty(t, s.f.calls)
	return s.replies(), s.f.directed
}

// TestDirectPathIsTheSDKs sends the same calls, of every outcome, through
// the direct path and through the SDK alone, on a session of each protocol
// version, and holds the replies equal byte for byte.
func TestDirectPathIsTheSDKs(t *testing.T) {
	wantDirect := 2 // the two calls with odd ids at the end
	for _, c := range parityCalls {
		if c.direct {
			wantDirect += 2
		}
	}
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			viaSDK, n := runParity(t, version, false)
			require.Zero(t, n)
			direct, n := runParity(t, version, true)
			assert.Equal(t, wantDirect, n, "calls answered on the direct path")
			require.Len(t, viaSDK, 2*len(parityCalls)+6)
			for id, want := range viaSDK {
				assert.Equal(t, want, direct[id], "id %s", id)
			}
			assert.Len(t, direct, len(viaSDK))
		})
	}
}

// TestDirectPathMapping pins what TestDirectPathIsTheSDKs compares, so that
// a change of both paths at once cannot pass unseen.
func TestDirectPathMapping(t *testing.T) {
	replies := func(version string) map[string]string {
		r, _ := runParity(t, version, true)
		return r
	}
	old, cur := replies("2025-06-18"), replies("2025-11-25")
	idOf := func(params string) string {
		for i, c := range parityCalls {
			if c.params == params {
				return fmt.Sprint(i + 1)
			}
		}
		t.Fatalf("no parity call %s", params)
		return ""
	}
	ok := idOf(`{"name":"ok"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+ok+`,"result":{"_meta":{"crux":{"receipt":"r\u00261"}},"content":[{"type":"text","text":"a \u003cb\u003e \u0026 \"c\"\n\u2028 é \u0001"}],"structuredContent":{"a":{"n":3},"z":[1.5,"\u003cx\u003e",null]}}}`, cur[ok])
	assert.Equal(t, `{"jsonrpc":"2.0","id":"<&>","result":{"_meta":{"crux":{"receipt":"r\u00261"}},"content":[{"type":"text","text":"a \u003cb\u003e \u0026 \"c\"\n\u2028 é \u0001"}],"structuredContent":{"a":{"n":3},"z":[1.5,"\u003cx\u003e",null]}}}`, cur[`"<&>"`])
	assert.Contains(t, cur[`"sA0"`], `"id":"sA0","result"`)
	echo := idOf(`{"name":"echo","arguments":{ "q" : "a<b" , "n":[1, 2.50, {"d":null}]	}}`)
	assert.Contains(t, cur[echo], `"text":"{ \"q\" : \"a\u003cb\" , \"n\":[1, 2.50, {\"d\":null}]\t}"`, "the arguments as sent")
	assert.Contains(t, cur[idOf(`{"name":"echo"}`)], `"structuredContent":{"agent":"alice","args":null,"raw_len":0}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+idOf(`{"name":"nil"}`)+`,"result":{"content":[]}}`, cur[idOf(`{"name":"nil"}`)])
	assert.Contains(t, cur[idOf(`{"name":"tool_error"}`)], `"isError":true}}`)

	badArg := idOf(`{"name":"bad_arg","arguments":{"top_k":"ten"}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+badArg+`,"error":{"code":-32602,"message":"top_k: want an integer <= 50","data":{"param":"top_k","reason":"type"}}}`, old[badArg])
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+badArg+`,"result":{"content":[{"type":"text","text":"top_k: want an integer \u003c= 50"}],"structuredContent":{"error":{"code":-32602,"data":{"param":"top_k","reason":"type"},"message":"top_k: want an integer \u003c= 50"}},"isError":true}}`, cur[badArg])
	// The version in _meta comes first.
	assert.Contains(t, old[idOf(`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`)], `"isError":true`)
	assert.Contains(t, cur[idOf(`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}`)], `"error":{"code":-32602`)
	assert.Contains(t, cur[idOf(`{"name":"bad_arg","_meta":{"io.modelcontextprotocol/protocolVersion":7}}`)], `"isError":true`)

	denied := idOf(`{"name":"denied"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+denied+`,"error":{"code":-32030,"message":"denied & logged","data":{"reason_code":"scope","receipt":{"id":"\u003cr\u003e"}}}}`, cur[denied])
	unknown := idOf(`{"name":"unknown"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":`+unknown+`,"error":{"code":-32601,"message":"unknown tool \"unknown\""}}`, cur[unknown])
	assert.Contains(t, cur[idOf(`{"name":"internal"}`)], `"error":{"code":-32603,"message":"disk on fire"}}`)
	assert.Contains(t, cur[idOf(`{"name":"plain_error"}`)], `"error":{"code":-32603,"message":"plain_error: not a crux error"}}`)
	assert.Contains(t, cur[idOf(`{"name":"bad_data"}`)], `"error":{"code":-32004,"message":"conflict"}}`)
	assert.Contains(t, cur[idOf(`{}`)], `"error":{"code":-32`)
	assert.Contains(t, cur[`"early"`], `"error"`)
}

// TestDirectPathCancellation: a notifications/cancelled naming a direct
// call cancels its context, read as the SDK reads it, and the call is
// still answered, on both paths alike; a call reusing the id of one in
// flight is refused as before.
func TestDirectPathCancellation(t *testing.T) {
	run := func(direct bool) (map[string]string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := &scriptedBackend{started: make(chan string, 16)}
		s := startSession(t, ctx, b, direct)
		s.send(initLine("2025-06-18"))
		s.await(`"init"`)
		block := func(id string) {
			s.send(callLine(id, `{"name":"block"}`))
			require.Equal(t, "block", <-b.started)
		}
		// stillRunning checks that the call id has no reply once a ping
		// sent after the cancellation has one.
		pings := 0
		stillRunning := func(id string) {
			pings++
			p := fmt.Sprintf(`"ping%d"`, pings)
			s.send(`{"jsonrpc":"2.0","id":` + p + `,"method":"ping"}`)
			s.await(p)
			assert.NotContains(t, s.replies(), id)
		}

		block("1")
		s.send(callLine("1", `{"name":"ok"}`)) // id in use
		s.await("null")
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}`)
		s.await("1")

		block(`"x"`)
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`)
		s.await(`"x"`)

		block("2")
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2.9}}`) // 2, as the SDK reads it
		s.await("2")

		block("3")
		for _, params := range []string{
			`{"requestId":"3"}`,
			`{"requestId":3,"reason":5}`,
			`{"requestId":3,"_meta":[]}`,
			`{"requestid":3}`,
			`{"requestId":true}`,
			`{"requestId":null}`,
			`[3]`,
		} {
			s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":` + params + `}`)
			stillRunning("3")
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":null,"reason":null,"requestId":4,"requestId":3}}`)
		s.await("3")
		s.close()
		return s.replies(), s.f.directed
	}
	viaSDK, n := run(false)
	require.Zero(t, n)
	direct, n := run(true)
	assert.Equal(t, 4, n)
	assert.Equal(t, viaSDK, direct)
	for _, id := range []string{"1", `"x"`, "2", "3"} {
		assert.Contains(t, direct[id], `"text":"stopped: context canceled"`, "id %s", id)
	}
	assert.Contains(t, direct["null"], `"code":-32600`)
}

// waitBackend runs every call until release is closed, and reports
// whether its context was done then.
type waitBackend struct {
	scriptedBackend
	started chan struct{}
	release chan struct{}
}

func (b *waitBackend) CallTool(ctx context.Context, _ crux.Caller, _ string, _ json.RawMessage) (*crux.Result, error) {
	b.started <- struct{}{}
	<-b.release
	return &crux.Result{Content: []crux.Content{{Type: "text", Text: fmt.Sprintf("released, ctx err %v", ctx.Err())}}}, nil
}

// TestDirectPathShutdown: the end of the input and the end of Serve's
// context wait for the direct calls in flight, which run to the end with
// a context that is not done, and write their replies before Serve
// returns.
func TestDirectPathShutdown(t *testing.T) {
	for _, byContext := range []bool{false, true} {
		t.Run(map[bool]string{false: "end of input", true: "context"}[byContext], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := &waitBackend{started: make(chan struct{}, 4), release: make(chan struct{})}
			serveCtx, stop := context.WithCancel(ctx)
			s := startSession(t, serveCtx, b, true)
			s.send(initLine("2025-06-18"))
			s.await(`"init"`)
			s.send(callLine("1", `{"name":"a"}`))
			s.send(callLine("2", `{"name":"b"}`))
			<-b.started
			<-b.started
			if byContext {
				stop()
			} else {
				s.in.Close()
			}
			select {
			case err := <-s.done:
				t.Fatalf("Serve returned %v with two calls running", err)
			case <-time.After(50 * time.Millisecond):
			}
			close(b.release)
			select {
			case err := <-s.done:
				if byContext {
					assert.ErrorIs(t, err, context.Canceled)
				} else {
					assert.NoError(t, err)
				}
			case <-ctx.Done():
				t.Fatal("Serve did not return after the calls finished")
			}
			replies := s.replies()
			for _, id := range []string{"1", "2"} {
				assert.Contains(t, replies[id], `"text":"released, ctx err \u003cnil\u003e"`)
			}
			assert.Equal(t, 2, s.f.directed)
			s.in.Close()
			stop()
		})
	}
}

// failAfter is an output whose writes fail after the first n.
type failAfter struct {
	mu sync.Mutex
	n  int
}

func (w *failAfter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return 0, errors.New("broken pipe")
	}
	w.n--
	return len(p), nil
}

// TestDirectPathBrokenOutput: once a write of the output fails, the direct
// calls in flight are cancelled, and Serve returns at the end of the input
// without waiting for replies it cannot write.
func TestDirectPathBrokenOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := &scriptedBackend{started: make(chan string, 4)}
	inR, inW := io.Pipe()
	st := StdioTransport(inR, &failAfter{n: 1}).(*stdioTransport)
	srv, a := newServer(b, crux.Caller{Agent: "alice"}, nil)
	done := make(chan error, 1)
	go func() { done <- st.serve(ctx, srv, a) }()
	send := func(line string) {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
	}
	send(initLine("2025-06-18"))
	for st.f.direct.Load() == nil || st.f.direct.Load().session.InitializeParams() == nil {
		time.Sleep(time.Millisecond)
	}
	send(callLine("1", `{"name":"block"}`))
	require.Equal(t, "block", <-b.started)
	send(callLine("2", `{"name":"ok"}`)) // its reply fails to be written
	require.Equal(t, "ok", <-b.started)
	inW.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Serve did not return")
	}
	assert.Equal(t, 2, st.f.directed)
	assert.Empty(t, st.f.calls)
}

// TestDirectPathUnencodableResult: a result that cannot be encoded, to
// which the SDK would send no reply at all, is answered with -32603.
func TestDirectPathUnencodableResult(t *testing.T) {
	lb := lineBufs.Get().(*lineBuf)
	a := &adapter{logger: slog.New(slog.DiscardHandler)}
	line := lb.response(a, int64(9), "t", &crux.Result{StructuredContent: map[string]any{"c": make(chan int)}}, nil)
	r := parseReply(t, strings.TrimSuffix(string(line), "\n"))
	require.NotNil(t, r.Error)
	assert.Equal(t, int64(crux.CodeInternalError), r.Error.Code)
	assert.Equal(t, "9", string(r.ID))
}

func TestParseToolCall(t *testing.T) {
	c, ok := parseToolCall(json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-03-26","x":[1]},"arguments":{"a":"}"},"name":"n"}`))
	require.True(t, ok)
	assert.Equal(t, toolCall{name: "n", args: json.RawMessage(`{"a":"}"}`), version: "2025-03-26"}, c)
	for _, params := range []string{`{"arguments":{}}`, `{"name":"a","name":"a"}`, `{"name":"a","x":1}`, `null`, `{"name":"a\"b"}`} {
		_, ok := parseToolCall(json.RawMessage(params))
		assert.False(t, ok, params)
	}
}

// FuzzParseToolCall: params the direct path takes decode, as the SDK
// decodes them, to the same name, arguments and protocol version.
//
//	go test -run '^$' -fuzz FuzzParseToolCall -fuzztime 30s ./mcpserver
func FuzzParseToolCall(f *testing.F) {
	for _, c := range parityCalls {
		f.Add([]byte(c.params))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return
		}
		params = trimSpace(params)
		c, ok := parseToolCall(params)
		if !ok {
			return
		}
		var p mcp.CallToolParamsRaw
		require.NoError(t, json.Unmarshal(params, &p), "%s", params)
		assert.Equal(t, p.Name, c.name)
		assert.Equal(t, string(p.Arguments), string(c.args))
		v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
		assert.Equal(t, v, c.version)
		assert.Less(t, v, newProtocolVersion)
	})
}

// BenchmarkResultEncoding: the encoding of a query_facts result (ten facts)
// as the SDK encodes it (the result only, as its JSON-RPC layer does) and
// as the direct path writes its whole response line.
func BenchmarkResultEncoding(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(b, err)
	defer db.Close()
	srv, err := crux.NewServer(db, nil)
	require.NoError(b, err)
	defer srv.Close()
	ctx := context.Background()
	caller := crux.Caller{Agent: "bench", Authenticated: true}
	for i := range 20 {
		args := fmt.Sprintf(`{"entity":"entity:%d","key":"k","value":"note %d about topic0001 and a <widget> & more"}`, i, i)
		_, err := srv.CallTool(ctx, caller, "store_fact", json.RawMessage(args))
		require.NoError(b, err)
	}
	res, err := srv.CallTool(ctx, caller, "query_facts", json.RawMessage(`{"query":"topic0001"}`))
	require.NoError(b, err)
	// As the SDK's jsonrpc2 layer encodes a result: without HTML escaping.
	sdk := func(r mcp.Result) []byte { return codec.Must(codec.MarshalNoEscape(r)) }
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sdk(sdkResult(res))
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		lb := new(lineBuf)
		for b.Loop() {
			codec.Must(lb.resultLine(int64(1), res))
		}
	})
}
