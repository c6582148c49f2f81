package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
)

// rawStdio is a stdio session driven line by line.
type rawStdio struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

// startRawStdio serves srv to alice over StdioTransport until the test
// ends.
func startRawStdio(t *testing.T, srv *crux.Server) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Serve(context.Background(), srv, crux.Caller{Agent: "alice", Authenticated: true},
			mcpserver.StdioTransport(inR, outW), nil)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return after its input ended")
		}
	})
	return &rawStdio{in: inW, out: bufio.NewReader(outR)}
}

// send writes line and, if reply, returns the line answering it.
func (s *rawStdio) send(t *testing.T, line string, reply bool) string {
	t.Helper()
	_, err := io.WriteString(s.in, line+"\n")
	require.NoError(t, err)
	if !reply {
		return ""
	}
	got, err := s.out.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSuffix(got, "\n")
}

// rawHTTP is an MCP session over HTTP driven request by request.
type rawHTTP struct {
	url, session, version string
	header                map[string]string // more headers
}

// post sends body (with the session and protocol version headers of h,
// when set) and returns the status and the JSON-RPC message of the answer
// ("" for none), read from a JSON body or from the data of an event
// stream.
func (h *rawHTTP) post(t *testing.T, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	if h.version != "" {
		req.Header.Set("Mcp-Protocol-Version", h.version)
	}
	for k, v := range h.header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient(aliceToken).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		h.session = id
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, strings.TrimSpace(string(data))
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.TrimSpace(d) != "" {
			return resp.StatusCode, strings.TrimSpace(d)
		}
	}
	return resp.StatusCode, ""
}

// sameJSON asserts that two answers are the same JSON value (member order
// and spacing aside).
func sameJSON(t *testing.T, want, got, msg string) {
	t.Helper()
	var w, g any
	if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal([]byte(got), &g) != nil {
		assert.Equal(t, want, got, msg)
		return
	}
	assert.Equal(t, w, g, msg)
}

// brief is an answer in a few words, for the table the test logs.
func brief(code int, answer string) string {
	var out string
	var one struct {
		ID     any `json:"id"`
		Result *struct {
			ProtocolVersion   string   `json:"protocolVersion"`
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	var many []json.RawMessage
	switch {
	case json.Unmarshal([]byte(answer), &many) == nil:
		codes := map[int]int{}
		for _, m := range many {
			if json.Unmarshal(m, &one) == nil && one.Error != nil {
				codes[one.Error.Code]++
			}
		}
		out = "array of " + itoa(len(many)) + " errors " + strings.Trim(strings.ReplaceAll(strings.TrimPrefix(jsonOf(codes), "{"), `"`, ""), "}")
	case json.Unmarshal([]byte(answer), &one) == nil && one.Error != nil:
		out = "error " + itoa(one.Error.Code)
	case one.Result != nil && one.Result.ProtocolVersion != "":
		out = "result " + one.Result.ProtocolVersion
	case one.Result != nil && one.Result.SupportedVersions != nil:
		out = "result " + strings.Join(one.Result.SupportedVersions, ",")
	case one.Result != nil:
		out = "result (id " + jsonOf(one.ID) + " only)"
	default:
		if len(answer) > 50 {
			answer = answer[:50] + "..."
		}
		out = "text " + strconv.Quote(answer)
	}
	if code != 0 {
		out = strconv.Itoa(code) + " " + out
	}
	return out
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func initializeLine(id int, version string) string {
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"parity","version":"test"}}}`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// TestTransportsAnswerAlike sends the same requests over stdio, HTTP with
// sessions and HTTP without, and checks that the answers are the same
// JSON-RPC messages: initialize asking for each protocol version the SDK
// knows (and one it does not), server/discover of 2026-07-28, and
// batches, which no transport runs (see "Malformed input" in the package
// documentation and [mcpserver.HTTPHandler]). An HTTP refusal of a batch
// is status 400 with the JSON-RPC answer as its body.
func TestTransportsAnswerAlike(t *testing.T) {
	var table []string
	row := func(request, stdio string, http ...string) {
		table = append(table, "| "+request+" | "+brief(0, stdio)+" | "+strings.Join(http, "; ")+" |")
	}
	t.Cleanup(func() { t.Log("request | stdio | HTTP\n" + strings.Join(table, "\n")) })
	srv := newCrux(t)
	stateful := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t)})
	stateless := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t), Stateless: true})
	servers := []struct {
		name string
		url  string
	}{{"http", stateful.url}, {"http-stateless", stateless.url}}

	versions := append(mcp.SupportedProtocolVersions(), "2099-01-01")
	for _, v := range versions {
		t.Run("initialize/"+v, func(t *testing.T) {
			want := startRawStdio(t, srv).send(t, initializeLine(1, v), true)
			var answers []string
			for _, s := range servers {
				code, got := (&rawHTTP{url: s.url}).post(t, initializeLine(1, v))
				assert.Equal(t, http.StatusOK, code, s.name)
				sameJSON(t, want, got, s.name)
				answers = append(answers, s.name+": "+brief(code, got))
			}
			row("initialize "+v, want, answers...)
		})
	}

	t.Run("server/discover", func(t *testing.T) {
		const discover = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"parity","version":"test"},` +
			`"io.modelcontextprotocol/clientCapabilities":{}}}}`
		want := startRawStdio(t, srv).send(t, discover, true)
		assert.Contains(t, want, `"supportedVersions":["2026-07-28",`)
		var answers []string
		for _, s := range servers {
			code, got := (&rawHTTP{url: s.url, version: "2026-07-28", header: map[string]string{"Mcp-Method": "server/discover"}}).post(t, discover)
			assert.Equal(t, http.StatusOK, code, s.name)
			sameJSON(t, want, got, s.name)
			answers = append(answers, s.name+": "+brief(code, got))
		}
		row("server/discover 2026-07-28", want, answers...)
	})

	batches := []struct{ name, body string }{
		{"calls", `[{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":"x","method":"ping"}]`},
		{"call and notification", `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
		{"notifications only", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
		{"not messages", `[1,"a"]`},
		{"empty", `[]`},
		{"initialize", "[" + initializeLine(1, "2025-03-26") + "]"},
	}
	for _, v := range mcp.SupportedProtocolVersions() {
		if v >= "2026-07-28" {
			continue // no session to open: initialize is of the handshake versions
		}
		for _, b := range batches {
			t.Run("batch/"+v+"/"+b.name, func(t *testing.T) {
				stdio := startRawStdio(t, srv)
				stdio.send(t, initializeLine(1, v), true)
				stdio.send(t, initializedLine, false)
				want := stdio.send(t, b.body, true)
				var answers []string
				for _, s := range servers {
					for _, header := range []bool{true, false} {
						h := &rawHTTP{url: s.url}
						code, _ := h.post(t, initializeLine(1, v))
						require.Equal(t, http.StatusOK, code)
						if header {
							h.version = v
						}
						h.post(t, initializedLine)
						code, got := h.post(t, b.body)
						name := s.name + map[bool]string{true: " with Mcp-Protocol-Version", false: " without"}[header]
						assert.Equal(t, http.StatusBadRequest, code, name)
						sameJSON(t, want, got, name)
						answers = append(answers, name+": "+brief(code, got))
					}
				}
				row("batch ("+b.name+") in a "+v+" session", want, answers...)
			})
		}
	}
}
