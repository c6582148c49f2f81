package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wireReply is a JSON-RPC response as the serve tests read it.
type wireReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Lines a raw client sends.
const (
	initializeLine  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// identityCall is a tools/call of get_agent_identity with the given id.
func identityCall(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"get_agent_identity"}}`
}

// rawSession is crux serve, run in-process over pipes, spoken to line by
// line.
type rawSession struct {
	t       *testing.T
	ctx     context.Context
	sends   chan string // lines to write to the server's stdin, in order
	replies chan string // lines the server wrote
	codes   chan int
}

// startRawServe runs crux serve in-process and initializes the session.
// Lines are written to stdin by one goroutine and read from stdout by
// another, so that a long line and its early answer do not block each
// other.
func startRawServe(t *testing.T, ctx context.Context, stderr io.Writer, args ...string) *rawSession {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	s := &rawSession{t: t, ctx: ctx, sends: make(chan string), replies: make(chan string, 100), codes: make(chan int, 1)}
	go func() {
		code := run(ctx, append([]string{"serve"}, args...), stdinR, stdoutW, stderr, env{}.list())
		stdoutW.Close()
		stdinR.Close()
		s.codes <- code
	}()
	go func() {
		defer stdinW.Close()
		var err error
		for line := range s.sends {
			if err == nil { // after a failed write, lines are discarded
				_, err = io.WriteString(stdinW, line+"\n")
			}
		}
	}()
	go func() {
		defer close(s.replies)
		sc := bufio.NewScanner(stdoutR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			s.replies <- sc.Text()
		}
	}()
	s.send(initializeLine)
	r := s.recv()
	require.Equal(t, "0", string(r.ID))
	require.NotNil(t, r.Result, "initialize: %+v", r.Error)
	s.send(initializedLine)
	return s
}

func (s *rawSession) send(line string) {
	select {
	case s.sends <- line:
	case <-s.ctx.Done():
		s.t.Fatal("the server does not read its input")
	}
}

// recvLine returns the next line of output.
func (s *rawSession) recvLine() string {
	s.t.Helper()
	select {
	case line, ok := <-s.replies:
		require.True(s.t, ok, "the server closed its output")
		return line
	case <-time.After(30 * time.Second):
		s.t.Fatal("no reply within 30s")
		return ""
	}
}

// recv returns the next line of output, read as one response.
func (s *rawSession) recv() wireReply {
	s.t.Helper()
	line := s.recvLine()
	var r wireReply
	require.NoError(s.t, json.Unmarshal([]byte(line), &r), "%.200s", line)
	return r
}

// TestServeMalformedLines: each malformed line is answered with the code
// and id of JSON-RPC, the session goes on, and a valid call that follows
// is answered.
func TestServeMalformedLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr syncBuffer
	dir := t.TempDir()
	s := startRawServe(t, ctx, &stderr, "--data", dir, "--agent", "tester")

	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	long := `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"store_fact","arguments":{"entity":"e","key":"k","value":"` +
		strings.Repeat("a", 17<<20) + `"}}}`
	for i, tc := range []struct {
		name, line string
		code       int64
		id         string // the id of the answer
		batch      bool   // the answer is an array of one error
	}{
		{"bad json", `{bad json`, -32700, "null", false},
		{"NaN literal", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_fact","arguments":{"confidence":NaN}}}`, -32700, "null", false},
		{"batch", `[` + identityCall("3") + `]`, -32600, "3", true},
		{"empty batch", `[]`, -32600, "null", false},
		{"no jsonrpc", `{"id":4,"method":"tools/call","params":{"name":"get_agent_identity"}}`, -32600, "4", false},
		{"object id", `{"jsonrpc":"2.0","id":{"n":5},"method":"tools/call","params":{"name":"get_agent_identity"}}`, -32600, "null", false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"get_agent_identity"}}`, -32600, "null", false},
		{"fractional id", `{"jsonrpc":"2.0","id":6.5,"method":"ping"}`, -32600, "6.5", false},
		{"NUL after the object", identityCall("7") + "\x00", -32700, "null", false},
		{"nesting 1001 deep", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_agent_identity","arguments":{"x":` + nested(998) + `}}}`, -32600, "8", false},
		{"method not a string", `{"jsonrpc":"2.0","id":9,"method":["tools/call"]}`, -32600, "9", false},
		{"line over 16 MiB", long, -32600, `"long"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			s.send(tc.line)
			if tc.batch {
				var rs []wireReply
				line := s.recvLine()
				require.NoError(t, json.Unmarshal([]byte(line), &rs), "%s", line)
				require.Len(t, rs, 1)
				require.NotNil(t, rs[0].Error, "%s", line)
				assert.Equal(t, tc.code, rs[0].Error.Code)
				assert.Equal(t, tc.id, string(rs[0].ID))
			} else {
				r := s.recv()
				require.NotNil(t, r.Error, "want an error, got result %s", r.Result)
				assert.Equal(t, tc.code, r.Error.Code, r.Error.Message)
				assert.Equal(t, tc.id, string(r.ID))
			}

			id := fmt.Sprintf(`"after-%d"`, i)
			s.send(identityCall(id))
			r := s.recv()
			assert.Equal(t, id, string(r.ID))
			require.Nil(t, r.Error, "the call after the malformed line")
			assert.Contains(t, string(r.Result), `"agent_name":"tester"`)
		})
	}
	s.t = t
	assert.Contains(t, stderr.String(), "answered a malformed JSON-RPC line")

	close(s.sends) // EOF
	select {
	case code := <-s.codes:
		assert.Equal(t, exitOK, code, "stderr: %.2000s", stderr.String())
	case <-ctx.Done():
		t.Fatal("serve did not return after stdin closed")
	}
	// The long line was not run.
	q := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "query_facts", `{"entity":"e"}`)
	require.Equal(t, exitOK, q.code, q.stderr)
	assert.Contains(t, q.stdout, `"count": 0`)
}
