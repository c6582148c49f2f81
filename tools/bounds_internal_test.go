package tools

import (
	"encoding/json"
	"testing"
)

// TestWireBytes checks the counted size against quoting the JSON for real.
func TestWireBytes(t *testing.T) {
	for _, v := range []any{
		nil, 42, "plain", `quote " and back\slash`, "tab\tnewline\n<b>&amp;</b>", "é \u2028 \u2029 \x01",
		map[string]any{"k": []any{"a\"b", 1.5, true, map[string]string{"<": ">"}}},
		json.RawMessage(`{"raw":"<x>\"y\""}`),
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		s, err := json.Marshal(string(b))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := wireBytes(v), len(b)+len(s)-2; got != want {
			t.Errorf("wireBytes(%#v) = %d, want %d", v, got, want)
		}
	}
}
