package tools

import (
	"encoding/json"
	"testing"

	"github.com/crux-go/crux/toolkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A result made of an output type carries that output's JSON once, as its
// text, and StructuredJSON gives it while the text is unchanged.
func TestStructuredJSON(t *testing.T) {
	for _, v := range []any{
		QueryFactsOutput{Rows: []FactRow{{FactID: "f_1", Value: "a <widget> & \"more\"", Score: 1.5}}, Count: 1},
		QueryOutput{Results: []QueryRow{{DocID: "d", Snippet: "x < y"}}}, // written by its AppendJSON
	} {
		res, err := toolkit.JSONResult(v)
		require.NoError(t, err)
		js, ok := res.StructuredJSON()
		require.True(t, ok, "%T", v)
		want, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		assert.Equal(t, string(want), js, "%T", v)
		assert.Equal(t, res.Content[0].Text, js)

		changed := *res
		changed.Content = []toolkit.Content{{Type: "text", Text: js + " "}}
		_, ok = changed.StructuredJSON()
		assert.False(t, ok, "%T: a changed text is not the structured content", v)
		changed.Content = append(res.Content, toolkit.Content{Type: "text", Text: "more"})
		_, ok = changed.StructuredJSON()
		assert.False(t, ok, "%T: two text items", v)
	}
	_, ok := (&toolkit.Result{Content: []toolkit.Content{{Type: "text", Text: "{}"}}, StructuredContent: map[string]any{}}).StructuredJSON()
	assert.False(t, ok, "a result not made by jsonResult")
}
