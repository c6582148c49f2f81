package crux_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/tools"
)

// TestDecode: in-process results decode to the tool's own value; results
// whose structured content is JSON (as a forwarding process gets them)
// decode the same; failures, feature-off answers and results without
// structured content are errors that say so.
func TestDecode(t *testing.T) {
	srv, err := crux.NewServer(memstore.New(), nil)
	require.NoError(t, err)
	defer srv.Close()
	ctx := context.Background()

	res, err := srv.CallTool(ctx, alice, "store_fact", json.RawMessage(`{"entity":"e","key":"k","value":"v","private":true}`))
	require.NoError(t, err)
	want, err := crux.Decode[tools.StoreFactOutput](res)
	require.NoError(t, err)
	assert.Equal(t, "e", want.Entity)
	assert.True(t, want.Private)
	assert.Equal(t, []string{}, want.SupersededFactIDs)
	ptr, err := crux.Decode[*tools.StoreFactOutput](res)
	require.NoError(t, err)
	assert.Equal(t, want, *ptr)

	// The same answer as JSON, as the crux command's forwarding hands it on.
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	got, err := crux.Decode[tools.StoreFactOutput](&crux.Result{StructuredContent: json.RawMessage(b)})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(b, &generic))
	got, err = crux.Decode[tools.StoreFactOutput](&crux.Result{StructuredContent: generic})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// The wrong type is refused when the JSON cannot fill it.
	_, err = crux.Decode[tools.QueryFactsOutput](&crux.Result{StructuredContent: json.RawMessage(`{"rows":"no"}`)})
	assert.Error(t, err)

	res, err = srv.CallTool(ctx, alice, "get_session", json.RawMessage(`{"session_id":"missing"}`))
	require.NoError(t, err)
	require.True(t, res.IsError)
	_, err = crux.Decode[tools.GetSessionOutput](res)
	assert.ErrorIs(t, err, crux.ErrToolFailed)
	assert.Contains(t, err.Error(), "session not found: missing")

	// artefact_put is off by default: its answer is the feature-off one.
	res, err = srv.CallTool(ctx, alice, "artefact_put", json.RawMessage(`{"content_bytes_base64":"aGk=","mime_type":"text/plain"}`))
	require.NoError(t, err)
	_, err = crux.Decode[tools.ArtefactPutOutput](res)
	assert.ErrorIs(t, err, crux.ErrFeatureOff)
	b, err = json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	_, err = crux.Decode[tools.ArtefactPutOutput](&crux.Result{StructuredContent: json.RawMessage(b)})
	assert.ErrorIs(t, err, crux.ErrFeatureOff)
	off, err := crux.Decode[tools.FeatureOffOutput](res)
	require.NoError(t, err)
	assert.Equal(t, "artefact_put", off.Tool)
	assert.False(t, off.FeatureEnabled)

	_, err = crux.Decode[tools.StoreFactOutput](&crux.Result{})
	assert.Error(t, err)
	_, err = crux.Decode[tools.StoreFactOutput](nil)
	assert.Error(t, err)
	assert.False(t, errors.Is(err, crux.ErrToolFailed))
}
