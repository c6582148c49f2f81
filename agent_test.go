package crux_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/toolkit"
)

func TestToolSpecsAll(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx := context.Background()
	listed := srv.ListTools(ctx, alice)
	specs, err := srv.ToolSpecs(ctx, alice)
	require.NoError(t, err)
	require.Len(t, specs, len(listed))
	for i, s := range specs {
		assert.Equal(t, listed[i].Name, s.Name)
		assert.Equal(t, listed[i].Description, s.Description)
		assert.JSONEq(t, string(listed[i].InputSchema), string(s.InputSchema), s.Name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(s.InputSchema, &schema), s.Name)
		assert.Equal(t, "object", schema["type"], s.Name)
	}
	// The specs are the caller's own: changing one changes no later answer.
	specs[0].InputSchema[0] = 'X'
	again, err := srv.ToolSpecs(ctx, alice)
	require.NoError(t, err)
	assert.True(t, json.Valid(again[0].InputSchema))
}

func TestToolSpecsNamed(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx := context.Background()
	specs, err := srv.ToolSpecs(ctx, alice, "query_facts", "store_fact")
	require.NoError(t, err)
	require.Len(t, specs, 2)
	assert.Equal(t, "query_facts", specs[0].Name)
	assert.Equal(t, "store_fact", specs[1].Name)
	assert.Contains(t, string(specs[1].InputSchema), `"entity"`)

	_, err = srv.ToolSpecs(ctx, alice, "store_fact", "no_such_tool")
	assert.ErrorContains(t, err, `"no_such_tool"`)
	_, err = srv.ToolSpecs(ctx, alice, "store_fact", "store_fact")
	assert.ErrorContains(t, err, "twice")
}

// newEnforcingServer serves under a free-local token minted by the
// server's own key, as the crux command does.
func newEnforcingServer(t *testing.T) *crux.Server {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := receipts.NewEd25519Signer(priv)
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: crux.DefaultTenant, IssuedAt: time.Now(),
		Capabilities: crux.FreeLocalCapabilities(crux.DefaultFlags())})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	srv, _ := newServer(t, &crux.Options{Signer: signer, Router: router})
	return srv
}

func TestToolSpecsFollowToken(t *testing.T) {
	srv := newEnforcingServer(t)
	ctx := context.Background()
	specs, err := srv.ToolSpecs(ctx, alice)
	require.NoError(t, err)
	var got []string
	for _, s := range specs {
		got = append(got, s.Name)
	}
	assert.Contains(t, got, "store_fact")
	assert.NotContains(t, got, "sync_pull")
	_, err = srv.ToolSpecs(ctx, alice, "sync_pull")
	assert.Error(t, err, "a tool the token denies is not listed")
}

func TestDispatchResult(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx := context.Background()
	d, err := srv.Dispatch(ctx, alice, "store_fact", json.RawMessage(`{"entity":"project:crux","key":"language","value":"Go"}`))
	require.NoError(t, err)
	require.False(t, d.IsError, d.Text)
	require.NotNil(t, d.Result)
	assert.Nil(t, d.Err)
	assert.Equal(t, d.Result.Content[0].Text, d.Text)

	d, err = srv.Dispatch(ctx, alice, "query_facts", json.RawMessage(`{"query":"language"}`))
	require.NoError(t, err)
	var out struct {
		Rows []struct{ Entity, Key, Value string }
	}
	require.NoError(t, json.Unmarshal([]byte(d.Text), &out), d.Text)
	require.Len(t, out.Rows, 1)
	assert.Equal(t, "Go", out.Rows[0].Value)
}

func TestDispatchNoArguments(t *testing.T) {
	srv, _ := newServer(t, nil)
	for _, in := range []string{"", " ", "null", "{}"} {
		d, err := srv.Dispatch(context.Background(), alice, "list_entities", json.RawMessage(in))
		require.NoError(t, err, "input %q", in)
		assert.False(t, d.IsError, "input %q: %s", in, d.Text)
	}
}

// dispatchError is the JSON a model reads for a rejected call.
type dispatchError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Param      string `json:"param"`
			Reason     string `json:"reason"`
			ReasonCode string `json:"reason_code"`
		} `json:"data"`
	} `json:"error"`
}

func TestDispatchBadArgument(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx := context.Background()
	for _, tc := range []struct{ input, param string }{
		{`{"entity":"e","key":"k"}`, "value"},                     // missing
		{`{"entity":"e","key":"k","value":"v","val":"v"}`, "val"}, // unknown
		{`{"entity":"e","key":"k","value":"v","confidence":2}`, "confidence"},
	} {
		d, err := srv.Dispatch(ctx, alice, "store_fact", json.RawMessage(tc.input))
		require.NoError(t, err, "a bad argument does not end the loop")
		require.True(t, d.IsError)
		assert.Nil(t, d.Result)
		require.NotNil(t, d.Err)
		assert.Equal(t, crux.CodeInvalidParams, d.Err.Code)
		var got dispatchError
		require.NoError(t, json.Unmarshal([]byte(d.Text), &got), d.Text)
		assert.Equal(t, crux.CodeInvalidParams, got.Error.Code)
		assert.Equal(t, d.Err.Message, got.Error.Message)
		assert.Equal(t, tc.param, got.Error.Data.Param, d.Text)
		assert.NotEmpty(t, got.Error.Data.Reason)
	}
	// Nothing of the rejected calls was stored.
	d, err := srv.Dispatch(ctx, alice, "list_entities", nil)
	require.NoError(t, err)
	assert.NotContains(t, d.Text, `"e"`)
}

func TestDispatchModelCorrectable(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx := context.Background()

	d, err := srv.Dispatch(ctx, alice, "no_such_tool", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.True(t, d.IsError)
	assert.Equal(t, crux.CodeMethodNotFound, d.Err.Code)
	assert.Contains(t, d.Text, "unknown tool: no_such_tool")

	d, err = srv.Dispatch(ctx, alice, "store_fact", json.RawMessage(`{"entity":`))
	require.NoError(t, err, "input that is not JSON is the model's to fix")
	require.True(t, d.IsError)
	assert.True(t, json.Valid([]byte(d.Text)), d.Text)
}

func TestDispatchRefusal(t *testing.T) {
	srv := newEnforcingServer(t)
	d, err := srv.Dispatch(context.Background(), alice, "sync_pull", nil)
	require.NoError(t, err, "a refusal does not end the loop")
	require.True(t, d.IsError)
	assert.Equal(t, crux.CodeCapabilityDenied, d.Err.Code)
	var got dispatchError
	require.NoError(t, json.Unmarshal([]byte(d.Text), &got), d.Text)
	assert.Equal(t, crux.CodeCapabilityDenied, got.Error.Code)
	assert.NotEmpty(t, got.Error.Data.ReasonCode)
	assert.Contains(t, d.Text, "refusal_receipt")
}

func TestDispatchToolError(t *testing.T) {
	failing := toolkit.New("fails", "always reports a failure", json.RawMessage(`{"type":"object","properties":{}}`), toolkit.Annotations{},
		func(context.Context, *toolkit.Env, toolkit.Caller, json.RawMessage) (*toolkit.Result, error) {
			return &toolkit.Result{Content: []toolkit.Content{{Type: "text", Text: "it did not work"}}, IsError: true}, nil
		})
	srv, _ := newServer(t, nil, failing)
	d, err := srv.Dispatch(context.Background(), alice, "fails", nil)
	require.NoError(t, err)
	assert.True(t, d.IsError)
	assert.Nil(t, d.Err)
	require.NotNil(t, d.Result)
	assert.Equal(t, "it did not work", d.Text)
}

func TestDispatchStructuredOnly(t *testing.T) {
	structured := toolkit.New("structured", "answers with structured content only", json.RawMessage(`{"type":"object","properties":{}}`), toolkit.Annotations{},
		func(context.Context, *toolkit.Env, toolkit.Caller, json.RawMessage) (*toolkit.Result, error) {
			return &toolkit.Result{StructuredContent: map[string]any{"n": 7}}, nil
		})
	srv, _ := newServer(t, nil, structured)
	d, err := srv.Dispatch(context.Background(), alice, "structured", nil)
	require.NoError(t, err)
	assert.False(t, d.IsError)
	assert.JSONEq(t, `{"n":7}`, d.Text)
}

func TestDispatchHostErrors(t *testing.T) {
	t.Run("internal", func(t *testing.T) {
		boom := toolkit.New("boom", "panics", json.RawMessage(`{"type":"object","properties":{}}`), toolkit.Annotations{},
			func(context.Context, *toolkit.Env, toolkit.Caller, json.RawMessage) (*toolkit.Result, error) {
				panic("handler bug")
			})
		srv, _ := newServer(t, nil, boom)
		_, err := srv.Dispatch(context.Background(), alice, "boom", nil)
		var e *crux.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, crux.CodeInternalError, e.Code)
	})
	t.Run("cancelled", func(t *testing.T) {
		srv, _ := newServer(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := srv.Dispatch(ctx, alice, "store_fact", json.RawMessage(`{"entity":"e","key":"k","value":"v"}`))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("closed", func(t *testing.T) {
		srv, _ := newServer(t, nil)
		require.NoError(t, srv.Close())
		_, err := srv.Dispatch(context.Background(), alice, "list_entities", nil)
		assert.ErrorIs(t, err, crux.ErrServerClosed)
	})
	t.Run("invalid caller", func(t *testing.T) {
		srv, _ := newServer(t, nil)
		_, err := srv.Dispatch(context.Background(), crux.Caller{Agent: "bad\x00name", Authenticated: true}, "list_entities", nil)
		var e *crux.Error
		require.True(t, errors.As(err, &e), "err = %v", err)
		assert.Equal(t, crux.CodeInvalidRequest, e.Code)
	})
}
