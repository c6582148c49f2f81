package tools_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/outschema"
	"github.com/crux-go/crux/tools"
)

// TestOutputContracts: the one-line output contract get_bootstrap serves
// for each tool names every top-level property of its output types, so
// that the line and the Go type (and the outputSchema derived from it) say
// the same.
func TestOutputContracts(t *testing.T) {
	for _, tl := range tools.All(nil) {
		types := tl.OutputTypes()
		require.NotEmpty(t, types, tl.Name)
		for _, ty := range types {
			full, err := outschema.Full(ty)
			require.NoError(t, err, tl.Name)
			for _, p := range full.PropertyOrder {
				assert.Regexp(t, regexp.MustCompile(`\b`+regexp.QuoteMeta(p)+`\b`), tl.Output,
					"%s: the output contract does not name %s of %s", tl.Name, p, ty)
			}
		}
	}
}
