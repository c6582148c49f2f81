package toolkit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/toolkit"
)

// appending writes its own JSON, which differs from encoding/json's only
// by its spacing, unless it is told it cannot.
type appending struct {
	N    int `json:"n"`
	fail bool
}

func (a appending) AppendJSON(b []byte) ([]byte, bool) {
	if a.fail {
		return append(b, "not JSON"...), false
	}
	return append(b, `{ "n": 7 }`...), true
}

// TestJSONResultAppender: an answer that is a JSONAppender, in any
// package, gives its own JSON text; one that cannot write it gives
// encoding/json's.
func TestJSONResultAppender(t *testing.T) {
	res, err := toolkit.JSONResult(appending{N: 7})
	require.NoError(t, err)
	assert.Equal(t, `{ "n": 7 }`, res.Content[0].Text)
	js, ok := res.StructuredJSON()
	assert.True(t, ok)
	assert.Equal(t, `{ "n": 7 }`, js)

	res, err = toolkit.JSONResult(appending{N: 7, fail: true})
	require.NoError(t, err)
	assert.Equal(t, `{"n":7}`, res.Content[0].Text)
}
