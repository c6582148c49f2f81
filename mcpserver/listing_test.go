package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/tools"
)

// allToolFlags are the defaults with every switch that adds a tool to the
// catalogue or runs its code turned on: the full catalogue.
func allToolFlags() crux.Flags {
	f := crux.DefaultFlags()
	f.AutonomyContract = true
	f.ReuseCheck = true
	f.EngramMCP = true
	f.MemoryAck = true
	f.Artefacts = true
	f.AgentPassports = true
	f.PassportRevocation = true
	f.PassportMintRequests = true
	f.ReceiptVerify = true
	f.Observe = true
	f.HandoffObservations = true
	f.AuditEnvelope = true
	f.IdentityContinuity = true
	return f
}

// listingSizes are the sizes of what a client reads at the start of a
// session: the tools/list result and the initialize result, as JSON on the
// wire.
type listingSizes struct {
	tools, list, initialize int
	raw                     []byte // the tools/list response
}

// measureListing connects to a crux server built with flags (nil for the
// defaults), enforcing a free-local token as the crux command does when
// router is true, and measures its listing.
func measureListing(t testing.TB, flags *crux.Flags, router bool) listingSizes {
	t.Helper()
	opts := &crux.Options{Flags: flags}
	if router {
		f := crux.DefaultFlags()
		if flags != nil {
			f = *flags
		}
		signer := receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(f)})
		require.NoError(t, err)
		r, err := rcx.NewRouter(tok, signer.Public(), nil)
		require.NoError(t, err)
		opts.Signer, opts.Router = signer, r
	}
	srv := newCruxWith(t.(*testing.T), opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Serve(ctx, srv, tester, mcpserver.StdioTransport(inR, outW), nil)
		outW.Close()
	}()
	lines := bufio.NewReader(outR)
	exchange := func(req string) []byte {
		_, err := io.WriteString(inW, req+"\n")
		require.NoError(t, err)
		if !strings.Contains(req, `"id"`) {
			return nil
		}
		line, err := lines.ReadBytes('\n')
		require.NoError(t, err)
		return bytes.TrimSuffix(line, []byte("\n"))
	}
	init := exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"size","version":"test"}}}`)
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	require.NoError(t, inW.Close())
	require.NoError(t, <-done)
	var reply struct {
		Result struct{ Tools []json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(list, &reply), "%s", list)
	return listingSizes{tools: len(reply.Result.Tools), list: len(list), initialize: len(init), raw: list}
}

// Budgets of what a client reads when a session starts, as JSON on the
// wire: the full catalogue's tools/list and the initialize result (which
// carries crux.Instructions). An agent pays for these bytes on every
// turn: raise one only with a reason.
//
// listBudget holds the listing the crux command serves (every tool the
// flags allow, with its free-local token) to 40 KB, about 0.6 KB a tool;
// it measured 39,202 B for 68 tools when set (129,019 B before the listing
// was compacted). listBudgetNoToken holds the listing without a token,
// which also shows the two hosted tools with their upgrade _meta (40,332 B
// for 70 tools when set). initializeBudget was raised from 2,060 B to
// take the guidance the descriptions no longer repeat: flags, unknown
// arguments, tenant_id, current versions, the compact output schemas
// (2,376 B measured).
const (
	listBudget        = 40_000
	listBudgetNoToken = 41_000
	initializeBudget  = 2_500
)

// TestListingSize reports the size of tools/list and initialize for the
// library's defaults and the full catalogue, with and without a
// capability token, and holds the full catalogue to its budget.
func TestListingSize(t *testing.T) {
	full := allToolFlags()
	for _, c := range []struct {
		name   string
		flags  *crux.Flags
		router bool
	}{
		{"defaults", nil, false},
		{"defaults+token", nil, true},
		{"all-flags", &full, false},
		{"all-flags+token", &full, true},
	} {
		s := measureListing(t, c.flags, c.router)
		t.Logf("%s: %d tools, tools/list %d B (%d B per tool), initialize %d B", c.name, s.tools, s.list, s.list/s.tools, s.initialize)
		assert.LessOrEqual(t, s.initialize, initializeBudget, "%s: initialize result", c.name)
		switch c.name {
		case "all-flags+token":
			assert.LessOrEqual(t, s.list, listBudget, "tools/list of the full catalogue")
		case "all-flags":
			assert.LessOrEqual(t, s.list, listBudgetNoToken, "tools/list of the full catalogue without a token")
		}
	}
}

// TestInitializeInstructions: the initialize result carries the guidance
// every tool shares, crux.Instructions unless Options say otherwise, and
// no description repeats it.
func TestInitializeInstructions(t *testing.T) {
	srv := newCrux(t)
	cs := connect(t, srv, tester)
	got := cs.InitializeResult().Instructions
	assert.Equal(t, crux.Instructions(), got)
	assert.Contains(t, got, "cuecrux_session first")
	for _, code := range []string{"-32602", "-32030", "-32601", "-32003", "-32004", "isError"} {
		assert.Contains(t, got, code)
	}
	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range list.Tools {
		assert.NotContains(t, tl.Description, "cuecrux_session` first", tl.Name)
		assert.NotContains(t, tl.Description, "Tip:", tl.Name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(srv, tester, &mcpserver.Options{Instructions: "mine"}).Connect(ctx, st, nil)
	require.NoError(t, err)
	other, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	assert.Equal(t, "mine", other.InitializeResult().Instructions)
	require.NoError(t, other.Close())
	require.NoError(t, ss.Wait())
}

// TestListToolsOutputSchema: over MCP every tool declares the compact
// output schema {"type":"object"}, which its structured content (always a
// JSON object) satisfies; crux.Server.ListTools keeps the typed one.
func TestListToolsOutputSchema(t *testing.T) {
	srv := newCrux(t)
	cs := connect(t, srv, tester)
	ctx := context.Background()
	typed := map[string]json.RawMessage{}
	for _, tl := range srv.ListTools(ctx, tester) {
		typed[tl.Name] = tl.OutputSchema
	}
	got, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, got.Tools)
	for _, g := range got.Tools {
		require.NotNil(t, g.OutputSchema, g.Name)
		b, err := json.Marshal(g.OutputSchema)
		require.NoError(t, err)
		assert.JSONEq(t, `{"type":"object"}`, string(b), g.Name)
		assert.Contains(t, string(typed[g.Name]), `"properties"`, "%s: in-process listing keeps the typed schema", g.Name)
	}
}

// TestListingTokenOnce: with a capability token, tools/list over MCP states
// the token once, in the result's _meta.crux, and no tool repeats it in its
// _meta or input schema; in-process, every tool keeps it.
func TestListingTokenOnce(t *testing.T) {
	full := allToolFlags()
	s := measureListing(t, &full, true)
	var reply struct {
		Result struct {
			Meta  map[string]map[string]any `json:"_meta"`
			Tools []map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(s.raw, &reply))
	shared := reply.Result.Meta["crux"]
	require.NotNil(t, shared, "tools/list result _meta.crux")
	assert.Equal(t, "rcx-capability-token", shared["filtered_by"])
	assert.Equal(t, "free", shared["tier"])
	assert.Equal(t, "verified", shared["receipt_class"])
	ref, _ := shared["token_ref"].(map[string]any)
	assert.Regexp(t, `^rcxct_`, ref["token_id"])
	assert.Len(t, ref["token_hash"], 64)
	require.NotEmpty(t, reply.Result.Tools)
	for _, tl := range reply.Result.Tools {
		b, err := json.Marshal(tl)
		require.NoError(t, err)
		assert.NotContains(t, string(b), `"x-crux-t`, tl["name"])
		assert.NotContains(t, string(b), `"x-crux-receipt-class"`, tl["name"])
		assert.NotContains(t, string(b), `filtered_by`, tl["name"])
		assert.NotContains(t, string(b), `token_ref`, tl["name"])
	}
}

// startAnswerBudget is the most an answer of the two tools a session
// starts with may take by default, as JSON on the wire.
const startAnswerBudget = 8 << 10

// TestSessionStartAnswers: cuecrux_session and get_bootstrap, which an
// agent calls when its session starts, answer at most 8 KB by default over
// MCP, for the full catalogue with the crux command's token, and more when
// asked with the argument their schemas document.
func TestSessionStartAnswers(t *testing.T) {
	full := allToolFlags()
	signer := receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(full)})
	require.NoError(t, err)
	r, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	cs := connect(t, newCruxWith(t, &crux.Options{Flags: &full, Signer: signer, Router: r}), tester)
	size := func(name string, args map[string]any) (int, map[string]any) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, res.Content)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		var sc map[string]any
		require.NoError(t, json.Unmarshal(mustJSON(t, res.StructuredContent), &sc))
		return len(b), sc
	}

	n, plan := size("cuecrux_session", map[string]any{})
	t.Logf("cuecrux_session {}: %d B", n)
	assert.LessOrEqual(t, n, startAnswerBudget, "cuecrux_session {}")
	assert.Len(t, plan["capability_graph"], tools.DefaultPlanCapabilities)
	assert.Contains(t, fmt.Sprint(plan["notes"]), "hints.max_capabilities lists more")
	more, all := size("cuecrux_session", map[string]any{"hints": map[string]any{"max_capabilities": 1000}})
	assert.Greater(t, more, n)
	assert.Greater(t, len(all["capability_graph"].([]any)), tools.DefaultPlanCapabilities, "hints.max_capabilities lists every tool you may call")

	n, boot := size("get_bootstrap", map[string]any{})
	t.Logf("get_bootstrap {}: %d B", n)
	assert.LessOrEqual(t, n, startAnswerBudget, "get_bootstrap {}")
	assert.Equal(t, true, boot["truncated"])
	more, all = size("get_bootstrap", map[string]any{"token_budget": 100000})
	assert.Greater(t, more, n)
	assert.Greater(t, len(all["facts"].([]any)), len(boot["facts"].([]any)), "a larger token_budget gets more entries")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
