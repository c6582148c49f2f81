package memio_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/memio"
	"github.com/crux-go/crux/store"
)

const header = `{"format":"crux-memories","version":1,"tenant":"t","exported_at":"2026-01-01T00:00:00Z"}`

func TestReadRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		file string
		line int
		msg  string
	}{
		"empty":                {"", 0, "empty"},
		"no header":            {`{"type":"fact"}`, 1, "not a crux memories header"},
		"other format":         {`{"format":"x","version":1,"tenant":"t","exported_at":"2026-01-01T00:00:00Z"}`, 1, `format "x"`},
		"newer version":        {`{"format":"crux-memories","version":9,"tenant":"t","exported_at":"2026-01-01T00:00:00Z"}`, 1, "newer"},
		"no tenant":            {`{"format":"crux-memories","version":1,"exported_at":"2026-01-01T00:00:00Z"}`, 1, "no tenant"},
		"two values":           {header + "\n" + `{"type":"constraint"} {}`, 2, "not a record"},
		"no record":            {header + "\n\n" + `{"type":"fact"}`, 3, "exactly one"},
		"line too long":        {header + "\n" + strings.Repeat(" ", memio.MaxLineBytes+1), 2, "longer than"},
		"session tenant":       {header + "\n" + `{"type":"session","session":{"session_id":"s","tenant_id":"u","state":{},"updated_at":"2026-01-01T00:00:00Z"}}`, 2, "tenant_id"},
		"session state":        {header + "\n" + `{"type":"session","session":{"session_id":"s","tenant_id":"t","state":[1],"updated_at":"2026-01-01T00:00:00Z"}}`, 2, "not a JSON object"},
		"state of 1 MiB and 1": {header + "\n" + `{"type":"session","session":{"session_id":"s","tenant_id":"t","state":{"a":"` + strings.Repeat("x", 1<<20) + `"},"updated_at":"2026-01-01T00:00:00Z"}}`, 2, "state is larger than 1048576 bytes"},
		"fact key of 1025":     {header + "\n" + `{"type":"fact","fact":{"id":"f_0000000000000000000000000000000a","tenant":"t","entity":"e","key":"` + strings.Repeat("k", 1025) + `","value":"v","confidence":1,"stored_at":"2026-01-01T00:00:00Z","version":1,"horizon_class":"medium","valid_from":"2026-01-01T00:00:00Z"}}`, 2, "entity or key longer than 1024 bytes"},
		"session id of 1025":   {header + "\n" + `{"type":"session","session":{"session_id":"` + strings.Repeat("s", 1025) + `","tenant_id":"t","state":{},"updated_at":"2026-01-01T00:00:00Z"}}`, 2, "longer than 1024 bytes"},
		"mismatched type":      {header + "\n" + `{"type":"session","constraint":{"constraint_id":"c"}}`, 2, "does not name"},
	} {
		t.Run(name, func(t *testing.T) {
			n := 0
			_, err := memio.Read(strings.NewReader(c.file), func(int, *store.MemoryRecord) error { n++; return nil })
			require.ErrorContains(t, err, c.msg)
			var le *memio.LineError
			if c.line > 0 {
				require.True(t, errors.As(err, &le), "%v", err)
				assert.Equal(t, c.line, le.Line)
			}
			assert.Zero(t, n)
		})
	}
}

func TestReadMCPMemory(t *testing.T) {
	file := `{"type":"entity","name":"A","entityType":"person","observations":["x","x"]}` + "\n\n" +
		`{"type":"relation","from":"A","to":"B","relationType":"knows"}`
	var got []store.FactValue
	var lines []int
	require.NoError(t, memio.ReadMCPMemory(strings.NewReader(file), func(line int, vals []store.FactValue) error {
		got = append(got, vals...)
		lines = append(lines, line)
		return nil
	}))
	assert.Equal(t, []int{1, 3}, lines)
	require.Len(t, got, 4)
	assert.Equal(t, store.FactValue{Entity: "A", Key: memio.MCPEntityType, Value: "person"}, got[0])
	assert.Equal(t, got[1], got[2], "one observation is one fact")
	assert.True(t, strings.HasPrefix(got[1].Key, memio.MCPObservationPrefix))
	assert.Equal(t, "A knows B", got[3].Value)

	for name, c := range map[string]string{
		"unknown type":       `{"type":"node","name":"A"}`,
		"entity fields":      `{"type":"entity","name":"A","observations":[]}`,
		"relation fields":    `{"type":"relation","from":"A","to":"B"}`,
		"mixed fields":       `{"type":"relation","from":"A","to":"B","relationType":"r","name":"A"}`,
		"unknown field":      `{"type":"entity","name":"A","entityType":"t","observations":[],"extra":1}`,
		"reserved entity":    `{"type":"entity","name":"__A","entityType":"t","observations":[]}`,
		"control in name":    `{"type":"entity","name":"A\u0007","entityType":"t","observations":[]}`,
		"empty from":         `{"type":"relation","from":"","to":"B","relationType":"r"}`,
		"name of 1025 bytes": `{"type":"entity","name":"` + strings.Repeat("a", 1025) + `","entityType":"t","observations":[]}`,
		"value past 1 MiB":   `{"type":"entity","name":"A","entityType":"t","observations":["` + strings.Repeat("o", 1<<20+1) + `"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			err := memio.ReadMCPMemory(strings.NewReader(c), func(int, []store.FactValue) error { return nil })
			var le *memio.LineError
			require.True(t, errors.As(err, &le), "%v", err)
			assert.Equal(t, 1, le.Line)
		})
	}
	assert.NoError(t, memio.ReadMCPMemory(strings.NewReader(""), func(int, []store.FactValue) error { return nil }), "an empty graph")
	atLimit := `{"type":"entity","name":"A","entityType":"t","observations":["` + strings.Repeat("o", 1<<20) + `"]}`
	assert.NoError(t, memio.ReadMCPMemory(strings.NewReader(atLimit), func(int, []store.FactValue) error { return nil }),
		"a value of 1 MiB, as store_fact and sync take")
}

// TestImportApplyFails: an apply that fails ends the import; the batches
// before it are counted, and the error names the lines applied.
func TestImportApplyFails(t *testing.T) {
	file := `{"type":"entity","name":"A","entityType":"t","observations":[]}` + "\n" +
		`{"type":"entity","name":"B","entityType":"t","observations":[]}` + "\n" +
		`{"type":"entity","name":"C","entityType":"t","observations":[]}`
	calls := 0
	sum, err := memio.Import(t.Context(), strings.NewReader(file), &memio.ImportOptions{Source: memio.SourceMCPMemory, MaxBatchRecords: 1},
		func(_ context.Context, b *memio.Batch) (*memio.BatchResult, error) {
			calls++
			if calls == 2 {
				return nil, errors.New("disk full")
			}
			return &memio.BatchResult{MemoryImportResult: store.MemoryImportResult{Facts: store.MemoryImportCounts{Imported: len(b.Values)}}, ReceiptID: "r1"}, nil
		})
	require.ErrorContains(t, err, "importing lines 2 to 2: disk full (lines 1 to 1 are imported; importing the file again completes the import)")
	var le *memio.LineError
	assert.False(t, errors.As(err, &le), "not a bad line")
	assert.Equal(t, 1, sum.Facts.Imported)
	assert.Equal(t, []string{"r1"}, sum.Receipts)
	assert.Equal(t, 2, calls)
}
