package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crux-go/crux/internal/codec"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// requireSDKMessage fails unless the message check passes on for line is
// the one the SDK's decoder makes of it.
func requireSDKMessage(t testing.TB, line []byte) {
	t.Helper()
	line = trimSpace(line)
	if len(line) == 0 {
		return
	}
	v := check(line)
	if v.outcome != outcomePass {
		return
	}
	want, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		t.Fatalf("check passes %q on, which the SDK cannot decode: %v", line, err)
	}
	if !reflect.DeepEqual(v.msg, want) {
		t.Fatalf("check passes %q on as %#v; the SDK decodes %#v", line, v.msg, want)
	}
}

// TestPassedMessagesAreTheSDKs: the messages the framing layer hands the
// SDK, built from the members it read (plainRequest) or by the SDK's
// decoder, are the SDK decoder's.
func TestPassedMessagesAreTheSDKs(t *testing.T) {
	for _, line := range passedLines {
		requireSDKMessage(t, []byte(line))
	}
}

var passedLines = []string{
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-9007199254740991,"method":"tools/call","params":{"name":"store_fact","arguments":{"entity":"e"}}}`,
	`{"jsonrpc":"2.0","id":9007199254740991,"method":"ping","params":[]}`,
	`{"jsonrpc":"2.0","id":"a<b>&\u00e9\u2028","method":"ping"}`,
	`{"jsonrpc":"2.0","id":"","method":""}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":null}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/\u0063all","params":{}}`,
	`{"jsonrpc":"2.0","id":3,"method":"ping","params" : { "a" : [ 1 , 2 ] } , "extra":true}`,
	`{"params":{"x":"y"},"method":"ping","id":"z","jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":0,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":4,"method":"p\xffng"}`,
	`{"jsonrpc":"2.0","id":"\xff","method":"ping"}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"s":"\ud800"}}`,
	`{"jsonrpc":"2.0","\u0069d":6,"method":"ping"}`,
	`{"jsonrpc":"2.0","ID":7,"Method":"x","method":"ping"}`,
	`{"jsonrpc":"2.0","id":8,"result":{}}`,
	`{"jsonrpc":"2.0","id":"r","error":{"code":-1,"message":"m"}}`,
}

// FuzzPassedMessages: for any line, a message the framing layer passes on
// is the SDK decoder's.
//
//	go test -run '^$' -fuzz FuzzPassedMessages -fuzztime 30s ./mcpserver
func FuzzPassedMessages(f *testing.F) {
	for _, line := range passedLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		requireSDKMessage(t, line)
	})
}

// TestEncodeLineIsTheSDKs: the lines framerConn writes are the SDK
// encoder's, with a newline, for results as the SDK marshals them (with
// its encoder: compact, without HTML escaping).
func TestEncodeLineIsTheSDKs(t *testing.T) {
	results := []any{
		map[string]any{},
		map[string]any{"a": "x<y>&z", "u": "\u2028\u2029", "e": "é字😀", "n": 1.5, "l": []any{nil, true}},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"rows":[{"v":"a<b"}]}`}}, StructuredContent: map[string]any{"rows": []any{}}},
		&mcp.CallToolResult{Content: []mcp.Content{}, IsError: true},
		strings.Repeat("long ", 10000),
		[]int{1, 2, 3},
		nil,
	}
	var ids []jsonrpc.ID
	for _, v := range []any{float64(1), float64(-42), float64(1 << 53), "s<&>\u2028", "", nil} {
		id, err := jsonrpc.MakeID(v)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	intID := func(n int) jsonrpc.ID { id, _ := jsonrpc.MakeID(float64(n)); return id }
	var msgs []jsonrpc.Message
	for _, r := range results {
		raw, err := codec.MarshalNoEscape(r)
		require.NoError(t, err)
		for _, id := range ids {
			msgs = append(msgs, &jsonrpc.Response{ID: id, Result: raw})
		}
	}
	msgs = append(msgs,
		&jsonrpc.Response{ID: intID(3), Error: &jsonrpc.Error{Code: -32602, Message: "bad <arg>"}},
		&jsonrpc.Response{ID: intID(5), Result: json.RawMessage("{\n}")}, // not the SDK's: through its encoder
		&jsonrpc.Request{ID: intID(6), Method: "ping"},
		&jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`{"level":"info"}`)},
	)
	for i, msg := range msgs {
		want, err := jsonrpc.EncodeMessage(msg)
		require.NoError(t, err)
		resp, _ := msg.(*jsonrpc.Response)
		got, err := encodeLine(msg, resp)
		require.NoError(t, err)
		require.Equal(t, string(want)+"\n", string(got), fmt.Sprintf("message %d", i))
	}
}
